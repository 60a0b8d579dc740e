#!/usr/bin/env node
/**
 * `koder-fleet`: the process entry point. Parses the role and runs its program as the process's
 * main fiber (`RoleRuntime`: signals interrupt it, the exit code comes from its Exit).
 */
import { Effect } from "effect"
import { RoleExit } from "./DaemonError.js"
import * as HeapGrowth from "./v8/HeapGrowth.js"
import * as BaselineTier from "./v8/BaselineTier.js"
import * as InliningBudget from "./v8/InliningBudget.js"
import * as Logging from "./observability/Logging.js"
import * as Roles from "./Roles.js"
import * as RoleRuntime from "./RoleRuntime.js"
import * as Shutdown from "./Shutdown.js"
import * as EventLoopScheduler from "./v8/EventLoopScheduler.js"

const version = "0.1.0"

const usage = () =>
  [
    "usage: koder-fleet <role> [flags]",
    "",
    "roles:",
    ...Roles.all.map((r) => `  ${r.padEnd(8)}${Roles.describe[r]}`),
    "",
    "  version  print the version",
    "",
    `flags of every role:${Logging.usage}${Shutdown.usage}`
  ].join("\n")

// A reader of stdout or stderr that goes away (`koder-fleet dev | head`, a closed pipe) must not
// crash the process: a crash skips the shutdown that stops its workloads, and dev left every pod's
// processes running. The lines that no one reads are dropped; any other stream error still throws.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code !== "EPIPE") throw e
  })
}
HeapGrowth.limit()
const [command, ...given] = process.argv.slice(2)
InliningBudget.limit(command)
BaselineTier.apply(command)
// The log flags apply to every role: taken off here, the role parses the rest.
const logFlags = Logging.extractFlags(given)
// So does the shutdown grace: every role's stop is bounded by it (Shutdown.ts).
const shutdownFlag = Shutdown.extractFlag(logFlags._tag === "Right" ? logFlags.right.rest : given)
const args = shutdownFlag._tag === "Right" ? [...shutdownFlag.right.rest] : given
if (logFlags._tag === "Right") Logging.configure(logFlags.right.settings)
if (shutdownFlag._tag === "Right") Shutdown.configure(shutdownFlag.right.graceMs)
if (logFlags._tag === "Left" || shutdownFlag._tag === "Left") {
  console.error(`koder-fleet: ${logFlags._tag === "Left" ? logFlags.left : shutdownFlag._tag === "Left" ? shutdownFlag.left : ""}`)
  process.exitCode = 2
} else if (command === "version" || command === "--version") {
  console.log(`koder-fleet ${version}`)
} else if (command === undefined || command === "help" || command === "--help" || command === "-h") {
  console.log(usage())
} else {
  const role = Roles.parse(command)
  // Before runMain's signal handlers (RoleRuntime): the deadline and the second signal's hard stop come first.
  if (role !== undefined && Roles.available.includes(role)) Shutdown.install(role)
  if (role === undefined) {
    console.error(`koder-fleet: unknown role ${JSON.stringify(command)}\n\n${usage()}`)
    process.exitCode = 2
  } else if (role === "server") {
    // Loaded on demand: `version` and `--help` need none of the server's dependencies.
    RoleRuntime.run(Effect.flatMap(Effect.promise(() => import("./federation/CoLocatedHub.js")), (CoLocatedHub) => CoLocatedHub.serverProgram(args)))
  } else if (role === "agent") {
    RoleRuntime.run(Effect.flatMap(Effect.promise(() => import("./agent/AgentRole.js")), (AgentRole) => AgentRole.program(args)))
  } else if (role === "hub") {
    RoleRuntime.run(Effect.flatMap(Effect.promise(() => import("./federation/HubRole.js")), (HubRole) => HubRole.program(args)))
  } else if (role === "dev") {
    RoleRuntime.run(Effect.flatMap(Effect.promise(() => import("./Dev.js")), (Dev) => Dev.program(args)))
  } else if (role === "box") {
    // Loaded on demand, like the server: the box needs none of the server's dependencies. The box
    // stops on SIGINT/SIGTERM by itself (`Box.main`): not interrupted meanwhile, it finishes that stop.
    const box = Effect.flatMap(Effect.promise(() => import("./box/Box.js")), (Box) =>
      Effect.flatMap(EventLoopScheduler.defaultRuntime, (fibers) => Effect.promise(() => Box.main(args, fibers)))
    )
    RoleRuntime.run(Effect.uninterruptible(Effect.flatMap(box, (code) => (code === 0 ? Effect.void : Effect.fail(new RoleExit({ code }))))))
  } else if (!Roles.available.includes(role)) {
    console.log(
      `koder-fleet ${role}: not built yet. This build has dev, server, agent, box and hub: run \`koder-fleet dev\` (see README.md).`
    )
  }
}
