"""One technique per module."""
