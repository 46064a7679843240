"""`torchpace bench`: measure each technique side by side."""
