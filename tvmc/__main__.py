from tvmc.cli.main import main

main()
