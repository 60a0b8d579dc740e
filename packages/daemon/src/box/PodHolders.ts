/**
 * The process driver's pod holders: the small process that makes a pod's namespaces and holds
 * them as the pod's pid 1 (Shim.holderScript, or the native shim), started through the Launcher.
 */
import { Runtime } from "@koder/fleet-core"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, lstatSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type * as Cgroups from "./Cgroups.js"
import type { Launcher } from "./Launcher.js"
import * as Procfs from "./Procfs.js"
import { writeTextSync } from "./RecordFiles.js"
import * as Shim from "./Shim.js"

/** A pod's holder: the process that made its namespaces (`unshare`) and the holder, pid 1 inside. */
export interface Holder {
  readonly unshare: Procfs.ProcessId
  readonly pid: number
  readonly startTime: number
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Starts holders for one box. */
export class PodHolders {
  /** The holder launch file, with and without a network namespace, once this box made sure it exists. */
  private readonly files = new Map<boolean, string>()
  /** The box's run directory (where the idle FIFO is), once known. */
  runDir: string | undefined
  /** Where one-off launch files go, once known. */
  launchDir: string | undefined

  constructor(
    private readonly tools: Shim.Tools,
    private readonly launcher: Launcher,
    private readonly dataDir: string
  ) {}

  /**
   * The launch file of every pod holder whose hostname can be passed as an argument (written once,
   * under a name that changes with its content: a running shell reads its file as it goes, so
   * a file in use is never rewritten).
   */
  private launchFile(net: boolean): string {
    let file = this.files.get(net)
    if (file === undefined) {
      const text = Shim.holderFile(this.tools, () => this.idleFifo(), net)
      file = join(this.dataDir, "sandboxes", `holder-${createHash("sha256").update(text).digest("hex").slice(0, 12)}.launch`)
      if (!existsSync(file)) writeTextSync(file, text)
      this.files.set(net, file)
    }
    return file
  }

  /**
   * The FIFO pod holders block on (see Shim.holderScript), made when missing: a holder whose
   * launch cannot open it does not start. Holders keep it open, so removing it stops none.
   */
  private idleFifo(): string {
    const file = join(this.runDir ?? join(this.dataDir, "sandboxes"), "idle.fifo")
    let fifo = false
    try {
      fifo = lstatSync(file).isFIFO()
    } catch {
      // not there yet
    }
    if (!fifo) {
      rmSync(file, { force: true })
      const r = spawnSync(this.tools.mkfifo, ["-m", "600", file], { encoding: "utf8" })
      if (r.status !== 0) throw new Runtime.Unavailable({ message: `sandbox: cannot make ${file}: ${(r.stderr || r.error?.message || "mkfifo failed").trim()}` })
    }
    return file
  }

  /** Start the holder of pod `id`; resolves once it holds the namespaces. */
  async start(id: string, hostname: string, net = false, steps: ReadonlyArray<Cgroups.Step> = []): Promise<Holder> {
    let answer: Array<string> | undefined
    // One launch file serves every pod, unless the pod's file must name its hostname or its cgroup.
    if (Shim.plainHostname(hostname) && steps.length === 0) answer = await this.launcher.run(this.launchFile(net), hostname)
    else {
      const file = join(this.launchDir ?? join(this.dataDir, "sandboxes"), `${id}.launch`)
      writeFileSync(file, Shim.holderFile(this.tools, () => this.idleFifo(), net, hostname, steps), { mode: 0o600 })
      answer = await this.launcher.run(file)
      rmSync(file, { force: true })
    }
    const unshare = Procfs.processId(Number(answer?.[0]))
    // The native holder answers once it is ready, as both maker and holder ("-": it failed);
    // unshare does not answer for its child.
    if (answer?.[1] !== undefined) {
      const holder = Procfs.processId(Number(answer[1]))
      if (unshare !== undefined && holder !== undefined) return { unshare, pid: holder.pid, startTime: holder.startTime }
      throw new Runtime.Unavailable({ message: "sandbox: the namespace holder did not start" })
    }
    for (let i = 0; i < 1000 && unshare !== undefined; i++) {
      const [pid] = Procfs.children(unshare.pid)
      const holder = Procfs.processId(pid)
      if (holder !== undefined) return { unshare, pid: holder.pid, startTime: holder.startTime }
      await sleep(i < 20 ? 1 : 5)
    }
    throw new Runtime.Unavailable({ message: "sandbox: the namespace holder did not start" })
  }
}
