"""What looking costs: ``perfkit overhead`` runs a program plainly and under perfkit (and under
torch.profiler, :mod:`.profiler_arm`) in fresh, interleaved processes and compares their throughput
(:mod:`.measure`)."""
