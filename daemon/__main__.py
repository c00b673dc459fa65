from autoharness.daemon.app import main

main()
