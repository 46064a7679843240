"""`torchpace doctor --verify`: each fix measured on the user's own, unmodified script.

    diagnosis = verify(diagnosis, ["train.py", "--epochs", "1"], context, VerifyOptions())

Fixes that can be switched on without editing the script (torchpace.verify.appliers) are
measured on fresh, unprofiled runs interleaved with the plain script (torchpace.measure); each
finding then carries a MeasuredSaving and the diagnosis a Verification (doctor/verification.py).
"""

from torchpace.verify.appliers import Context, Fix
from torchpace.verify.run import VerifyOptions, context_of, verify, verify_hint

__all__ = ["Context", "Fix", "VerifyOptions", "context_of", "verify", "verify_hint"]
