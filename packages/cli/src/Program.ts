/**
 * The `kfleet` command tree: global flags, then every verb registered by its module in
 * `commands/`. Kept apart from `main.ts` so tests and `completion` can build the tree without
 * running it.
 */
import { Command } from "commander"
import { examples, env as processEnv, type Env } from "./Cli.js"
import { version } from "./index.js"
import * as Apply from "./commands/Apply.js"
import * as Cluster from "./commands/Cluster.js"
import * as Completion from "./commands/Completion.js"
import * as Config from "./commands/Config.js"
import * as Describe from "./commands/Describe.js"
import * as Federation from "./commands/Federation.js"
import * as Logs from "./commands/Logs.js"
import * as Nodes from "./commands/Nodes.js"
import * as Workloads from "./commands/Workloads.js"
import * as Get from "./commands/Get.js"

/** Every verb module, in help order. */
const modules: ReadonlyArray<{ readonly register: (program: Command, env: Env) => void }> = [Get, Describe, Apply, Logs, Workloads, Nodes, Cluster, Federation, Config, Completion]

/** The program, its verbs registered. */
export const program = (env: Env = processEnv()): Command => {
  const p = new Command("kfleet")
    .description("kfleet controls Koder Fleet clusters: kubectl's verbs, against the Fleet API.")
    .version(`kfleet ${version}`, "--client-version", "print the client version only")
    .option("--kubeconfig <file>", "kubeconfig file (default: $KUBECONFIG, ~/.koder-fleet/kubeconfig, ~/.kube/config)")
    .option("--context <name>", "kubeconfig context to use")
    .option("-n, --namespace <ns>", "namespace for this request")
    .option("-s, --server <url>", "API server URL (overrides the kubeconfig)")
    .option("--token <token>", "bearer token (overrides the kubeconfig)")
    .option("--insecure-skip-tls-verify", "do not verify the server's certificate")
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ writeErr: (s) => env.t.err(s), writeOut: (s) => env.t.out(s), outputError: (s, write) => write(env.t.red(s)) })
  for (const m of modules) m.register(p, env)
  examples(
    p,
    `
  kfleet apply -f examples/hello        # create or update what the files describe
  kfleet get pods -o wide               # list pods
  kfleet rollout status deploy/hello    # follow a rollout
  kfleet logs -f deployment/hello       # stream a workload's logs`
  )
  return p
}
