/** `koder-fleet box` as root: pods get namespaces, containers cgroups (see BoxSuite.ts). */
import { suite } from "./BoxSuite.js"

suite("isolated", [])
