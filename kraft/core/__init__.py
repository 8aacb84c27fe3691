"""The sans-I/O KRaft protocol core: messages and time in, actions out."""
