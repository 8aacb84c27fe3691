"""The process composition root and the command-line tools: role config files, storage checks,
`kraft-server` start-up, `kraft-admin` and `kraft-storage`. Nothing below imports this package."""
