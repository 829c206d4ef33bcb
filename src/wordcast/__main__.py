from wordcast.cli import main

raise SystemExit(main())
