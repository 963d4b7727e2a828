"""Reading a host: the parsers of what its tools print, the output bounds, and this machine's own
read without an SSH stack (the readers' command text lives in facts/)."""
