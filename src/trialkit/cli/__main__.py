from trialkit.cli.main import main

main()
