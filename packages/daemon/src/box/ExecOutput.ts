/**
 * An exec's child process from spawn to end: its output kept (bounded), its stdin written, and a
 * time limit. The driver says how the command is started and how it is killed when time is up.
 */
import type { Runtime } from "@koder/fleet-core"
import type { ChildProcess } from "node:child_process"

/** Output of an exec kept per stream; more is cut (an exec is a probe or a command, not a pipe). */
export const maxExecOutput = 4 * 1024 * 1024

/** Resolve when a child process has been spawned, reject when it could not be. */
export const spawned = (child: ChildProcess): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve)
    child.once("error", reject)
  })

/** How an exec's child ended, with what it wrote. */
export interface Outcome {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  readonly timedOut: boolean
}

/**
 * Feed a spawned child `request.stdin`, keep its output, and call `onTimeout` once when
 * `request.timeoutMs` passes before it ends; resolves when it has closed.
 */
export const collect = async (child: ChildProcess, request: Runtime.ExecRequest, onTimeout: () => void): Promise<Outcome> => {
  const out = { stdout: [] as Array<Buffer>, stderr: [] as Array<Buffer>, sizes: { stdout: 0, stderr: 0 } }
  for (const stream of ["stdout", "stderr"] as const)
    child[stream]!.on("data", (b: Buffer) => {
      if (out.sizes[stream] >= maxExecOutput) return
      out[stream].push(b)
      out.sizes[stream] += b.length
    })
  child.stdin!.on("error", () => undefined)
  child.stdin!.end(request.stdin ?? "")
  let timedOut = false
  const timer =
    request.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true
          onTimeout()
        }, request.timeoutMs)
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.once("close", (code, signal) => resolve([code, signal]))
  )
  if (timer) clearTimeout(timer)
  return {
    code,
    signal,
    stdout: Buffer.concat(out.stdout).toString("utf8"),
    stderr: Buffer.concat(out.stderr).toString("utf8"),
    timedOut
  }
}
