"""Command-line front end (thin argparse over the lower layers)."""
