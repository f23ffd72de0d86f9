"""What the test modules share: clusters of real processes, SUT clients, store builders,
browser helpers. Test modules import from here, never from each other."""
