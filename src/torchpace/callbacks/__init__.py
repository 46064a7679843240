"""torchpace inside the training frameworks people use: Lightning and the Hugging Face Trainer.

    from torchpace.callbacks.lightning import TorchpaceLightningCallback
    from torchpace.callbacks.huggingface import TorchpaceTrainerCallback

Each profiles a window of steps after a warm-up, writes the torchpace report, and hands
torchpace.monitor.Throughput's figures to the framework's logger. The frameworks are optional:
importing torchpace (or this package) imports neither; each module imports its own framework.
"""
