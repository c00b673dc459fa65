from claude_autoharness.daemon.app import main

main()
