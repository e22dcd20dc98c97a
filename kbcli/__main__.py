from kbcli.main import main

main()
