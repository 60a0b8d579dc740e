/** `koder-fleet box` without namespaces or cgroups, as an unprivileged box runs (see BoxSuite.ts). */
import { suite } from "./BoxSuite.js"

suite("plain", ["--isolation", "none", "--cgroups", "none"])
