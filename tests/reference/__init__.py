"""A plain numpy float32 forward pass of a llama-family decoder: the oracle of our C decoder."""
