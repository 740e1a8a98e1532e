"""The model: a registry GGUF converted once per dtype, local folders and hub ids loaded, and
int8 linear layers (block Hadamard rotation, activations quantized per row)."""
