/**
 * runc as the box calls it: the shim around a foreground `runc run`, a command run to its end,
 * and the error runc logged.
 */
import { spawn } from "node:child_process"
import * as Oci from "./Oci.js"
import { signalNumber } from "./Signals.js"

/**
 * The shim: `sh -c SHIM kbox-runc-shim DIR RUNC ROOT ID`. It holds nothing but runc's exit
 * status: runc gets the FIFOs (opened read-write here, so no writer ever sees EPIPE), writes its
 * own errors to `runc.log` (JSON), the container's init pid to `init.pid` once it runs.
 */
export const shimScript = `d=$1; runc=$2; root=$3; id=$4
exec 3<>"$d/stdout.fifo" 4<>"$d/stderr.fifo" </dev/null >/dev/null 2>&1
echo "$$" >"$d/shim"
"$runc" --root "$root" --log "$d/runc.log" --log-format json run --keep --bundle "$d/bundle" --pid-file "$d/init.pid" "$id" >&3 2>&4 3>&- 4>&-
echo "$?" >"$d/exit"
`

/** The last error runc logged (`--log-format json`), without runc's "runc run failed: " preamble. */
export const lastRuncError = (text: string | undefined): string | undefined => {
  let out: string | undefined
  for (const line of (text ?? "").split("\n")) {
    try {
      const entry = JSON.parse(line) as { level?: string; msg?: string }
      if (entry.level === "error" || entry.level === "fatal") out = entry.msg
    } catch {
      // not a JSON line
    }
  }
  return out?.replace(/^runc (run|exec) failed: /, "")
}

export /** Run a command to its end; never rejects (a spawn failure is code -1). */
const run = (
  file: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = { PATH: Oci.defaultPath }
): Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }> =>
  new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"], env, cwd: "/" })
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (b: Buffer) => (stdout += b.toString()))
    child.stderr!.on("data", (b: Buffer) => (stderr += b.toString()))
    child.once("error", (e) => resolve({ code: -1, stdout, stderr: e.message }))
    child.once("close", (code, signal) => resolve({ code: code ?? 128 + (signalNumber(signal ?? "SIGKILL") ?? 9), stdout, stderr }))
  })

