/**
 * `kfleet completion bash|zsh|fish`: a shell script completing verbs, their subcommands and
 * flags (from the command tree itself, so it never drifts) and common resource types.
 */
import type { Command } from "commander"
import { Effect } from "effect"
import { CliError } from "../CliError.js"
import { examples, type Env } from "../Cli.js"

const types = "pods deployments replicasets statefulsets daemonsets jobs cronjobs services endpoints ingresses configmaps secrets namespaces nodes events serviceaccounts persistentvolumeclaims poddisruptionbudgets horizontalpodautoscalers"

/** Verb → subcommands and flags, from the program (pure). */
export const tree = (program: Command): ReadonlyArray<{ readonly verb: string; readonly subcommands: ReadonlyArray<string>; readonly flags: ReadonlyArray<string> }> =>
  program.commands.map((c) => ({
    verb: c.name(),
    subcommands: c.commands.map((s) => s.name()),
    flags: c.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined))
  }))

/** The script for `shell` (pure). */
export const script = (program: Command, shell: string): string | undefined => {
  const t = tree(program)
  const globals = program.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined)).join(" ")
  const verbs = t.map((x) => x.verb).join(" ")
  if (shell === "bash" || shell === "zsh") {
    const cases = t.map((x) => `    ${x.verb}) words="${[...x.subcommands, ...(x.subcommands.length === 0 ? [types] : []), ...x.flags].join(" ")}" ;;`).join("\n")
    const body = `# kfleet ${shell} completion: source <(kfleet completion ${shell})
_kfleet() {
  local cur verb words
  cur="\${COMP_WORDS[COMP_CWORD]}"
  verb="\${COMP_WORDS[1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "${verbs} ${globals}" -- "$cur") )
    return
  fi
  case "$verb" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=( $(compgen -W "$words ${globals}" -- "$cur") )
}
`
    return shell === "bash" ? `${body}complete -F _kfleet kfleet\n` : `${body}autoload -U +X bashcompinit && bashcompinit\ncomplete -F _kfleet kfleet\n`
  }
  if (shell === "fish") {
    const lines = [
      "# kfleet fish completion: kfleet completion fish | source",
      "complete -c kfleet -f",
      ...t.map((x) => `complete -c kfleet -n "__fish_use_subcommand" -a ${x.verb}`),
      ...t.flatMap((x) => [
        ...x.subcommands.map((sc) => `complete -c kfleet -n "__fish_seen_subcommand_from ${x.verb}" -a ${sc}`),
        ...(x.subcommands.length === 0 ? [`complete -c kfleet -n "__fish_seen_subcommand_from ${x.verb}" -a "${types}"`] : [])
      ])
    ]
    return `${lines.join("\n")}\n`
  }
  return undefined
}

/** Register `completion`. */
export const register = (program: Command, env: Env): void => {
  examples(
    program
      .command("completion")
      .description("Print a shell completion script (bash, zsh or fish)")
      .argument("<shell>")
      .action((shell: string) =>
        env.local((t) =>
          Effect.suspend(() => {
            const text = script(program, shell)
            if (text === undefined) return Effect.fail(new CliError({ message: `unsupported shell type "${shell}" (bash, zsh or fish)` }))
            t.out(text)
            return Effect.void
          })
        )
      ),
    `
  source <(kfleet completion bash)
  kfleet completion fish | source`
  )
}
