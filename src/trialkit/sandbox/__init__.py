"""Where an agent's processes run and what they can reach (DESIGN §9).

`netns`: loopback-only network namespaces, with this machine's loopback services bridged in
(what `trialkit run --offline` runs its trials in).
"""
