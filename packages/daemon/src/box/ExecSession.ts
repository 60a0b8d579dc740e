/**
 * A streaming exec's child process as a `StreamSession`: stdin from channel 0, stdout and stderr
 * on channels 1 and 2, and one Status on channel 3 when it ends. Both drivers start the command
 * their own way (the shim's `enter` script, `runc exec`) and hand the launch to `open`.
 *
 * A TTY is util-linux `script`: it puts the command on a new pseudo-terminal and copies between
 * that terminal and its own pipes, so the box needs no native pty binding. The terminal's size is
 * set with `stty -F` on the command's terminal, which makes the kernel send it SIGWINCH, as a
 * resize in a real terminal does.
 */
import { Runtime, StreamSession } from "@koder/fleet-core"
import { type ChildProcess, spawn } from "node:child_process"
import { readlinkSync } from "node:fs"
import * as ExecOutput from "./ExecOutput.js"
import * as Procfs from "./Procfs.js"
import { exitCodeOf } from "./Signals.js"
import { which } from "./Tools.js"

/** How the driver starts the command (without a terminal). */
export interface Launch {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd?: string
  /** Own process group, so the whole tree can be signalled. */
  readonly detached?: boolean
}

/** What the driver does around the child. */
export interface Hooks {
  /** Kill the command and what it started (the session was closed before it ended). */
  readonly kill: (child: ChildProcess) => void
  /** The exit code to report, from how the child ended (default: `Signals.exitCodeOf`). */
  readonly exitCode?: (code: number | null, signal: NodeJS.Signals | null) => number
  /** A failure to report instead of an exit code (the command could not be run at all). */
  readonly failure?: () => { readonly exitCode: number; readonly stderr: string } | undefined
  /** After the child ended and its Status was sent (temporary files). */
  readonly cleanup?: () => void
}

// Output waits for the reader beyond this many queued bytes: a fast writer (a `cat` of a big
// file, `kubectl cp` from the pod) is paced by the caller instead of growing the box's memory.
const highWater = 1024 * 1024
const lowWater = 256 * 1024

/** One shell word. */
export const quote = (s: string): string => (/^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`)

/**
 * The launch through `script`, which gives the command a terminal. `script -c` runs its command
 * with `$SHELL -c`: SHELL is the box's sh for `script` only, and the command gets the value the
 * container had (or none) back.
 */
export const onTerminal = (launch: Launch, script: string, sh: string, stty = "stty"): Launch => {
  const own = launch.env["SHELL"]
  const restore = own === undefined ? "unset SHELL; " : `SHELL=${quote(own)}; export SHELL; `
  // The caller's first resize comes a moment after the start: the command waits for it (half a
  // second at most) so that it starts on a terminal of the caller's size, not a 0x0 one.
  const waitForSize = `i=0; while [ "$(${quote(stty)} size 2>/dev/null)" = "0 0" ] && [ $i -lt 25 ]; do sleep 0.02; i=$((i+1)); done; `
  const command = `${waitForSize}${restore}exec ${[launch.file, ...launch.args].map(quote).join(" ")}`
  // TERM says what the terminal is, as containerd does for a TTY exec.
  return { ...launch, file: script, args: ["-qefc", command, "/dev/null"], env: { TERM: "xterm", ...launch.env, SHELL: sh } }
}

/** The terminal a process of the tree under `root` has as its standard input. */
const terminalOf = (root: number): string | undefined => {
  for (const p of Procfs.tree(root)) {
    if (p.pid === root) continue
    try {
      const t = readlinkSync(`/proc/${p.pid}/fd/0`)
      if (t.startsWith("/dev/pts/")) return t
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined
}

const encoder = new TextEncoder()

/**
 * Start the command and relay it. Resolves once it has started; a command that cannot be
 * started at all is a `Runtime.Unavailable`.
 */
export const open = async (
  launch: Launch,
  request: StreamSession.ExecStreamRequest,
  hooks: Hooks,
  /** No terminal can be given (a user-namespaced runc container gets pipes): a TTY request's output is then one stream. */
  noTerminal = false
): Promise<StreamSession.StreamSession> => {
  let started = launch
  if (request.tty && !noTerminal) {
    const script = which("script")
    const sh = which("sh") ?? "/bin/sh"
    if (script === undefined) throw new Runtime.Unsupported({ message: "a TTY needs util-linux `script` on the node (Debian: bsdutils)" })
    started = onTerminal(launch, script, sh, which("stty"))
  }
  const child = spawn(started.file, [...started.args], {
    env: { ...started.env },
    cwd: started.cwd ?? "/",
    detached: started.detached ?? false,
    stdio: ["pipe", "pipe", "pipe"]
  })
  await ExecOutput.spawned(child).catch((e) => {
    throw new Runtime.Unavailable({ message: `exec: ${String(e)}` })
  })
  const out = StreamSession.queue()
  let closed = false
  let ended = false

  const pump = (stream: NodeJS.ReadableStream, channel: number) =>
    stream.on("data", (b: Buffer) => {
      out.push({ channel, data: new Uint8Array(b.buffer, b.byteOffset, b.length) })
      if (out.pending() > highWater) {
        stream.pause()
        void out.drained(lowWater).then(() => stream.resume())
      }
    })
  pump(child.stdout!, StreamSession.Channel.stdout)
  pump(child.stderr!, request.tty ? StreamSession.Channel.stdout : StreamSession.Channel.stderr)
  child.stdin!.on("error", () => undefined)
  if (!request.stdin) child.stdin!.end()

  // Resizes before the terminal is found (the command starts a moment after `script`) wait here.
  let size: { readonly width: number; readonly height: number } | undefined
  let terminal: string | undefined
  let resizing = false
  const applySize = async () => {
    if (resizing || size === undefined || child.pid === undefined) return
    resizing = true
    try {
      for (let i = 0; i < 100 && terminal === undefined && !ended; i++) {
        terminal = terminalOf(child.pid)
        if (terminal === undefined) await new Promise((r) => setTimeout(r, 10))
      }
      while (terminal !== undefined && size !== undefined && !ended) {
        const { width, height } = size
        size = undefined
        await new Promise<void>((resolve) => {
          const stty = spawn(which("stty") ?? "stty", ["-F", terminal!, "cols", String(width), "rows", String(height)], { stdio: "ignore" })
          stty.once("error", () => resolve())
          stty.once("close", () => resolve())
        })
      }
    } finally {
      resizing = false
    }
  }

  void new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once("close", (code, signal) => resolve([code, signal]))).then(
    ([code, signal]) => {
      ended = true
      const failed = hooks.failure?.()
      if (failed !== undefined && failed.stderr !== "") out.push({ channel: StreamSession.Channel.stderr, data: encoder.encode(failed.stderr) })
      const exitCode = failed?.exitCode ?? (hooks.exitCode ?? exitCodeOf)(code, signal)
      out.push(StreamSession.statusFrame(StreamSession.exitStatus(exitCode, request.command)))
      out.end()
      hooks.cleanup?.()
    }
  )

  return {
    send: (frame) => {
      if (closed || ended) return
      switch (frame.channel) {
        case StreamSession.Channel.stdin:
          if (request.stdin && child.stdin!.writable) child.stdin!.write(frame.data)
          return
        case StreamSession.Channel.resize:
          if (!request.tty || noTerminal) return
          size = StreamSession.sizeOf(frame.data) ?? size
          void applySize()
          return
        case StreamSession.Channel.close:
          if (frame.data[0] === StreamSession.Channel.stdin) child.stdin!.end()
          return
      }
    },
    frames: out.frames,
    close: () => {
      if (closed) return
      closed = true
      child.stdin!.end()
      if (!ended) hooks.kill(child)
    }
  }
}
