"""Placeholder: nbgrad.utils.data (Dataset, TensorDataset, DataLoader) is filled in by its owner."""
