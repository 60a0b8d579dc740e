/**
 * What the process driver does inside a pod's namespaces through nsenter, as root: open low ports
 * in its network namespace, cover the node's directories and bind-mount volumes in its mount namespace.
 */
import type { Runtime } from "@koder/fleet-core"
import { spawnSync } from "node:child_process"
import { rmdirSync } from "node:fs"
import { join } from "node:path"
import { invalid, unavailable } from "./Driver.js"
import * as NodeHiding from "./NodeHiding.js"
import * as Shim from "./Shim.js"

/**
 * Let any uid of a pod with its own network namespace listen on ports below 1024 there, as
 * containerd does (`net.ipv4.ip_unprivileged_port_start=0`): its processes are not root, and
 * the namespace's ports are its own. Host-network pods keep the host's rule.
 */
export const openLowPorts = (tools: Shim.Tools, holderPid: number): void => {
  const r = spawnSync(tools.nsenter!, ["-t", String(holderPid), "-n", "--", tools.sh, "-c", "echo 0 >/proc/sys/net/ipv4/ip_unprivileged_port_start"], {
    encoding: "utf8"
  })
  if (r.status !== 0) throw unavailable(`sandbox: cannot open low ports in the pod's network: ${(r.stderr || r.error?.message || "failed").trim()}`)
}

/** Cover `dirs` in pod `id`'s mount namespace (NodeHiding.ts); returns them. Throws when it cannot. */
export const hideNode = (tools: Shim.Tools, id: string, holderPid: number, dirs: ReadonlyArray<string>): ReadonlyArray<string> => {
  const cover = NodeHiding.coverDirName(id)
  const r = spawnSync(tools.nsenter!, ["-t", String(holderPid), "-m", "--", tools.sh, "-c", NodeHiding.hideScript, "hide", cover, ...dirs], {
    encoding: "utf8"
  })
  // The covers were made there, on the host; the pod's namespace keeps them where they moved.
  for (const d of dirs)
    try {
      rmdirSync(join(d, cover))
    } catch {
      // not made (the script stopped before it), or gone
    }
  if (r.status !== 0) throw unavailable(`sandbox: cannot hide the node's directories: ${(r.stderr || r.error?.message || "failed").trim()}`)
  return dirs
}

/** Bind-mount a volume in a pod's mount namespace, whose covered node directories are `hidden`. */
export const bindMount = (tools: Shim.Tools, holderPid: number, hidden: ReadonlyArray<string>, m: Runtime.Mount): void => {
  const r = spawnSync(
    tools.nsenter!,
    // The source as the box reaches it in the pod's namespace, where the node's directories are covered.
    ["-t", String(holderPid), "-m", "--", tools.sh, "-c", Shim.mountScript, "mount", NodeHiding.sourceIn(hidden, m.hostPath), m.containerPath, m.readOnly === true ? "ro" : "rw"],
    { encoding: "utf8" }
  )
  if (r.status !== 0) throw invalid(`mount ${m.hostPath} at ${m.containerPath}: ${(r.stderr || r.error?.message || "failed").trim()}`)
}
