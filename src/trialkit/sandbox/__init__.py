"""Where an agent's processes run and what they can reach (DESIGN §9).

- `base`: the interface: `SandboxProvider` (capabilities, suite setup, one sandbox per trial),
  `Sandbox` (`exec`, `open_process`, files), `SandboxPolicy` (network per phase, `Limits`),
  `ExecResult`, `LimitExceeded`;
- `registry`: providers by name (`trialkit.sandboxes` entry points);
- `local` (no isolation), `bwrap` (bubblewrap), `docker` / `podman`: the providers;
- `netns`: loopback-only network namespaces, with this machine's loopback services bridged in
  (what `trialkit run --offline` runs its trials in).
"""
