"""Arista EOS: pyavd rendering (napalm sessions and netmiko CLI come with the apply path)."""
