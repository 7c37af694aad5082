"""Imports PyTorch for the tests that need it, or exits 77 (ctest: skipped) saying how to
install it."""
import sys

try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed (Debian: apt-get install python3-torch; "
          "deploy/bootstrap-debian.sh installs it)")
    sys.exit(77)
