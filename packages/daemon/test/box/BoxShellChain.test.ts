/** `koder-fleet box --shim sh` as root: the sh chain a box without a C compiler uses (see BoxSuite.ts). */
import { suite } from "./BoxSuite.js"

suite("isolated", [], "sh")
