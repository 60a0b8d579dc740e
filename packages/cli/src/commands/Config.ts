/**
 * `kfleet config`: the kubeconfig's contexts — list them, show or switch the current one, set a
 * context's namespace (or cluster, user), and print the merged view. Edits keep the rest of the
 * file (comments included) and go to the first file of the kubeconfig list, as kubectl's do.
 */
import type { Command } from "commander"
import { Effect } from "effect"
import { CliError } from "../CliError.js"
import { examples, type Env } from "../Cli.js"
import * as Kubeconfig from "../Kubeconfig.js"
import * as Printers from "../Printers.js"

const load = (command: Command) => Kubeconfig.load((command.optsWithGlobals() as { kubeconfig?: string }).kubeconfig)

/** Register `config`. */
export const register = (program: Command, env: Env): void => {
  const config = program.command("config").description("Read and modify kubeconfig files (contexts and namespaces)")
  examples(
    config,
    `
  kfleet config get-contexts
  kfleet config use-context fleet
  kfleet config set-context --current --namespace=shop`
  )

  const getContexts = config
    .command("get-contexts")
    .description("List the contexts of the kubeconfig")
    .option("-o, --output <format>", "name: print only context names")
    .action((opts: { output?: string }, command: Command) =>
      env.local((t) =>
        Effect.sync(() => {
          const k = load(command)
          if (opts.output === "name") t.out(k.contexts.map((c) => `${c.name}\n`).join(""))
          else t.out(`${Printers.align([["CURRENT", "NAME", "CLUSTER", "AUTHINFO", "NAMESPACE"], ...Kubeconfig.contextRows(k)])}\n`)
        })
      )
    )
  examples(getContexts, "  kfleet config get-contexts\n  kfleet config get-contexts -o name")

  const current = config
    .command("current-context")
    .description("Print the current context")
    .action((_: unknown, command: Command) =>
      env.local((t) =>
        Effect.suspend(() => {
          const k = load(command)
          if (k.currentContext === undefined) return Effect.fail(new CliError({ message: "current-context is not set" }))
          t.out(`${k.currentContext}\n`)
          return Effect.void
        })
      )
    )
  examples(current, "  kfleet config current-context")

  examples(
    config
      .command("use-context")
      .description("Set the current context")
      .argument("<name>")
      .action((name: string, _: unknown, command: Command) =>
        env.local((t) =>
          Effect.suspend(() => {
            const k = load(command)
            if (!k.contexts.some((c) => c.name === name)) return Effect.fail(new CliError({ message: `no context exists with the name: "${name}"` }))
            Kubeconfig.editFile(k, (text) => Kubeconfig.withCurrentContext(text, name))
            t.out(`Switched to context "${name}".\n`)
            return Effect.void
          })
        )
      ),
    "  kfleet config use-context fleet"
  )

  examples(
    config
      .command("set-context")
      .description("Set a context's namespace, cluster or user (creating the context if needed)")
      .argument("[name]")
      .option("--current", "modify the current context")
      .option("--namespace <ns>", "the context's default namespace")
      .option("--cluster <cluster>", "the context's cluster")
      .option("--user <user>", "the context's user")
      .action((name: string | undefined, opts: { current?: boolean; namespace?: string; cluster?: string; user?: string }, command: Command) =>
        env.local((t) =>
          Effect.suspend(() => {
            const k = load(command)
            const target = opts.current ? k.currentContext : name
            if (target === undefined) return Effect.fail(new CliError({ message: opts.current ? "no current context is set" : "you must give a context name or --current" }))
            // The global -n/--namespace is this verb's own --namespace.
            const namespace = opts.namespace ?? (command.optsWithGlobals() as { namespace?: string }).namespace
            const fields = {
              ...(namespace === undefined ? {} : { namespace }),
              ...(opts.cluster === undefined ? {} : { cluster: opts.cluster }),
              ...(opts.user === undefined ? {} : { user: opts.user })
            }
            const existed = k.contexts.some((c) => c.name === target)
            Kubeconfig.editFile(k, (text) => Kubeconfig.withContextFields(text, target, fields))
            t.out(`Context "${target}" ${existed ? "modified" : "created"}.\n`)
            return Effect.void
          })
        )
      ),
    `
  kfleet config set-context --current --namespace=shop
  kfleet config set-context staging --cluster=fleet --user=fleet-admin --namespace=staging`
  )

  const view = config
    .command("view")
    .description("Print the merged kubeconfig (secrets redacted unless --raw)")
    .option("--raw", "show tokens and keys")
    .action((opts: { raw?: boolean }, command: Command) =>
      env.local((t) =>
        Effect.sync(() => {
          const k = load(command)
          const redact = (v: Record<string, unknown>) =>
            opts.raw ? v : Object.fromEntries(Object.entries(v).map(([key, val]) => [key, /token|data$/.test(key) ? "REDACTED" : val]))
          t.out(
            Printers.yaml({
              apiVersion: "v1",
              kind: "Config",
              clusters: k.clusters.map((c) => ({ name: c.name, cluster: redact(c.value) })),
              users: k.users.map((u) => ({ name: u.name, user: redact(u.value) })),
              contexts: k.contexts.map((c) => ({ name: c.name, context: c.value })),
              "current-context": k.currentContext ?? ""
            })
          )
        })
      )
    )
  examples(view, "  kfleet config view\n  kfleet config view --raw")
}
