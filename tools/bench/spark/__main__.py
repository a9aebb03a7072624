from tools.bench.spark.bench import main

raise SystemExit(main())
