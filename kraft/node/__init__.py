"""The real node: asyncio + grpc.aio around the sans-I/O core."""
