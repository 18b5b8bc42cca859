"""What this machine really has: the device probe and its child process."""
