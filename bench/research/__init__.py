"""Engine research that never ships: CPU-class emulation, the GPU check, model comparisons."""
