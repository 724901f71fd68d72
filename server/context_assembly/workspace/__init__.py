"""The `.codebolt/` workspace: its layout, definition files and settings."""
