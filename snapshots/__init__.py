"""Snapshots on the metadata side: the image as records, snapshot files written from an image and
loaded back, and `kraft-snapshot`, the inspection CLI (docs/snapshots.md)."""
