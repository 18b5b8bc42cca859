"""Demo profiles (JSON data; a package only so that the wheel carries the folder)."""
