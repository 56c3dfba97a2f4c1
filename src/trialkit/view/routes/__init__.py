"""The viewer's routes, one module per part; each exports `routes` (see `trialkit.view.app`)."""
