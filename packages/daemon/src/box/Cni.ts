/**
 * Pod networking delegated to standard CNI plugins (the CNI specification 1.0: the same plugins
 * and network configuration files containerd and CRI-O use). Where isolated mode's built-in
 * bridge (PodNetwork.ts) is the default, `--cni-conf-dir` hands the pod's network namespace to the
 * first network configuration found there (`*.conflist`, else `*.conf`/`*.json`, in name order),
 * whose plugins are found in `--cni-bin-dir`:
 *
 *   ADD   every plugin of the list in order, each given the previous one's result (`prevResult`);
 *         the first IP of the final result is the pod's IP
 *   CHECK every plugin in order with the result ADD gave (the box's health check of a pod network)
 *   DEL   every plugin in reverse order, with that result; a plugin's DEL of what is gone succeeds
 *
 * Each call is the plugin binary with the standard environment (`CNI_COMMAND`, `CNI_CONTAINERID`,
 * `CNI_NETNS`, `CNI_IFNAME`, `CNI_PATH`, `CNI_ARGS` with the pod's Kubernetes names) and the
 * plugin's configuration on stdin; its error (`{code, msg, details}`) is reported as it says.
 *
 * The node's pod CIDR goes into IPAM: a `host-local` IPAM section without `ranges` or `subnet`
 * gets `ranges: [[{subnet: <podCIDR>}]]`, as Calico's `usePodCidr` does, so one file serves every
 * node. The ADD result is kept beside the sandbox, so DEL and CHECK after a box restart have it.
 */
import { spawn } from "node:child_process"
import { existsSync, readFileSync, readdirSync } from "node:fs"
import { join } from "node:path"

/** One plugin's configuration, as the file gives it. */
export type PluginConfig = Readonly<Record<string, unknown>> & { readonly type: string }

/** A network configuration list (a `.conf` file is a list of one). */
export interface NetworkList {
  readonly cniVersion: string
  readonly name: string
  readonly plugins: ReadonlyArray<PluginConfig>
  /** The file it came from. */
  readonly file: string
}

/** A CNI result (spec 1.0 §Result): what ADD answers. */
export interface Result {
  readonly cniVersion?: string
  readonly interfaces?: ReadonlyArray<{ readonly name: string; readonly mac?: string; readonly sandbox?: string }>
  readonly ips?: ReadonlyArray<{ readonly address: string; readonly gateway?: string; readonly interface?: number }>
  readonly routes?: ReadonlyArray<{ readonly dst: string; readonly gw?: string }>
  readonly dns?: Readonly<Record<string, unknown>>
}

/** A plugin's failure (spec 1.0 §Error), with the plugin's name. */
export class CniError extends Error {
  constructor(
    readonly plugin: string,
    readonly code: number,
    message: string
  ) {
    super(`CNI plugin ${plugin}: ${message}${code > 0 ? ` (code ${code})` : ""}`)
  }
}

const record = (v: unknown): Record<string, unknown> => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {})

/** Parse a network configuration file's text (pure); a string is what is wrong with it. */
export const parseConfig = (text: string, file: string): NetworkList | string => {
  let doc: Record<string, unknown>
  try {
    doc = record(JSON.parse(text))
  } catch (e) {
    return `${file}: not JSON: ${e instanceof Error ? e.message : String(e)}`
  }
  const name = doc["name"]
  const cniVersion = typeof doc["cniVersion"] === "string" ? doc["cniVersion"] : "1.0.0"
  if (typeof name !== "string" || name === "") return `${file}: name: required`
  const list = Array.isArray(doc["plugins"]) ? doc["plugins"] : typeof doc["type"] === "string" ? [doc] : undefined
  if (list === undefined || list.length === 0) return `${file}: plugins: a list of plugins (or a single plugin with a type) is required`
  const plugins: Array<PluginConfig> = []
  for (const [i, p] of list.entries()) {
    const type = record(p)["type"]
    if (typeof type !== "string" || !/^[\w.-]+$/.test(type)) return `${file}: plugins[${i}].type: a plugin binary name`
    plugins.push(record(p) as PluginConfig)
  }
  return { cniVersion, name, plugins, file }
}

/** The network configuration of a directory: the first file by name, lists first (as libcni). */
export const loadDir = (dir: string): NetworkList => {
  if (!existsSync(dir)) throw new Error(`--cni-conf-dir ${dir}: no such directory`)
  const files = readdirSync(dir).sort()
  const chosen = files.find((f) => f.endsWith(".conflist")) ?? files.find((f) => f.endsWith(".conf") || f.endsWith(".json"))
  if (chosen === undefined) throw new Error(`--cni-conf-dir ${dir}: no .conflist, .conf or .json network configuration`)
  const parsed = parseConfig(readFileSync(join(dir, chosen), "utf8"), join(dir, chosen))
  if (typeof parsed === "string") throw new Error(parsed)
  return parsed
}

/** A host port forwarded to the pod (the `portMappings` capability, which the portmap plugin takes). */
export interface PortMapping {
  readonly hostPort: number
  readonly containerPort: number
  readonly protocol: "tcp" | "udp" | "sctp"
  readonly hostIP?: string
}

/**
 * A plugin's stdin for one call (pure): its config, the list's name and version, the pod CIDR in
 * IPAM, `prevResult`, and `runtimeConfig.portMappings` for a plugin with that capability.
 */
export const pluginInput = (
  list: NetworkList,
  plugin: PluginConfig,
  podCidr: string | undefined,
  prevResult: Result | undefined,
  portMappings: ReadonlyArray<PortMapping> = []
): Record<string, unknown> => {
  const ipam = record(plugin["ipam"])
  const withCidr =
    podCidr !== undefined && ipam["type"] === "host-local" && ipam["ranges"] === undefined && ipam["subnet"] === undefined
      ? { ...plugin, ipam: { ...ipam, ranges: [[{ subnet: podCidr }]] } }
      : plugin
  const wantsPorts = record(plugin["capabilities"])["portMappings"] === true && portMappings.length > 0
  return {
    ...withCidr,
    cniVersion: list.cniVersion,
    name: list.name,
    ...(prevResult === undefined ? {} : { prevResult }),
    ...(wantsPorts ? { runtimeConfig: { ...record(plugin["runtimeConfig"]), portMappings } } : {})
  }
}

/** The pod's first IP (without its prefix length) in a result. */
export const podIpOf = (result: Result): string | undefined => result.ips?.[0]?.address.split("/")[0]

/** What one call needs beyond the configuration. */
export interface Call {
  readonly containerId: string
  readonly netns: string
  readonly ifname?: string
  /** `K8S_POD_NAMESPACE`, `K8S_POD_NAME`, `K8S_POD_UID`, ... (`CNI_ARGS`). */
  readonly args?: Readonly<Record<string, string>>
  readonly podCidr?: string
  readonly portMappings?: ReadonlyArray<PortMapping>
}

/**
 * The call for a pod sandbox (pure): its id, its network namespace while its holder (`holderPid`)
 * lives (an ended pod's namespace is gone: DEL is told so by an empty `CNI_NETNS` and still
 * releases the address), its Kubernetes names as `CNI_ARGS`, its host ports for portmap.
 */
export const sandboxCall = (
  id: string,
  spec: { readonly namespace: string; readonly name: string; readonly podUid: string; readonly ports?: ReadonlyArray<{ readonly containerPort: number; readonly hostPort?: number; readonly protocol?: string }> },
  podCidr: string,
  holderPid: number | undefined
): Call => ({
  containerId: id,
  netns: holderPid === undefined ? "" : `/proc/${holderPid}/ns/net`,
  podCidr,
  args: { K8S_POD_NAMESPACE: spec.namespace, K8S_POD_NAME: spec.name, K8S_POD_UID: spec.podUid, K8S_POD_INFRA_CONTAINER_ID: id },
  portMappings: (spec.ports ?? []).flatMap((p) =>
    p.hostPort === undefined ? [] : [{ hostPort: p.hostPort, containerPort: p.containerPort, protocol: (p.protocol ?? "TCP").toLowerCase() as PortMapping["protocol"] }]
  )
})

/** Runs a network configuration's plugins from a bin dir. */
export class CniRunner {
  constructor(
    readonly binDirs: ReadonlyArray<string>,
    readonly list: NetworkList,
    private readonly timeoutMs = 60_000
  ) {}

  private binary(type: string): string {
    for (const dir of this.binDirs) {
      const p = join(dir, type)
      if (existsSync(p)) return p
    }
    throw new CniError(type, 0, `not found in ${this.binDirs.join(":")} (--cni-bin-dir)`)
  }

  private exec(command: "ADD" | "DEL" | "CHECK", plugin: PluginConfig, call: Call, prevResult: Result | undefined): Promise<Result | undefined> {
    const bin = this.binary(plugin.type)
    const env: Record<string, string> = {
      PATH: process.env["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin",
      CNI_COMMAND: command,
      CNI_CONTAINERID: call.containerId,
      CNI_NETNS: call.netns,
      CNI_IFNAME: call.ifname ?? "eth0",
      CNI_PATH: this.binDirs.join(":"),
      CNI_ARGS: ["IgnoreUnknown=1", ...Object.entries(call.args ?? {}).map(([k, v]) => `${k}=${v}`)].join(";")
    }
    const input = JSON.stringify(pluginInput(this.list, plugin, call.podCidr, prevResult, call.portMappings))
    return new Promise((resolve, reject) => {
      const child = spawn(bin, [], { env, stdio: ["pipe", "pipe", "pipe"] })
      let out = ""
      let err = ""
      const timer = setTimeout(() => child.kill("SIGKILL"), this.timeoutMs)
      child.stdout.on("data", (b: Buffer) => (out = (out + b.toString()).slice(-1_000_000)))
      child.stderr.on("data", (b: Buffer) => (err = (err + b.toString()).slice(-4000)))
      child.once("error", (e) => {
        clearTimeout(timer)
        reject(new CniError(plugin.type, 0, e.message))
      })
      child.once("close", (code) => {
        clearTimeout(timer)
        let parsed: Record<string, unknown> | undefined
        try {
          parsed = out.trim() === "" ? undefined : record(JSON.parse(out))
        } catch {
          parsed = undefined
        }
        if (code !== 0) {
          const msg = typeof parsed?.["msg"] === "string" ? `${parsed["msg"]}${typeof parsed["details"] === "string" && parsed["details"] !== "" ? `: ${parsed["details"]}` : ""}` : (err.trim() || out.trim() || `exited ${code}`)
          return reject(new CniError(plugin.type, typeof parsed?.["code"] === "number" ? parsed["code"] : 0, `${command} ${msg}`))
        }
        resolve(command === "ADD" ? ((parsed ?? {}) as Result) : undefined)
      })
      child.stdin.end(input)
    })
  }

  /** ADD: every plugin in order; the final result. A failure undoes what was added (DEL of the plugins that ran). */
  async add(call: Call): Promise<Result> {
    let result: Result | undefined
    const ran: Array<PluginConfig> = []
    try {
      for (const plugin of this.list.plugins) {
        ran.push(plugin)
        result = (await this.exec("ADD", plugin, call, result)) ?? result
      }
    } catch (e) {
      for (const plugin of ran.reverse()) await this.exec("DEL", plugin, call, result).catch(() => undefined)
      throw e
    }
    if (result === undefined || podIpOf(result) === undefined) throw new CniError(this.list.plugins.at(-1)?.type ?? "?", 0, "ADD answered no IP for the pod")
    return result
  }

  /** CHECK: every plugin in order with the ADD result. */
  async check(call: Call, result: Result): Promise<void> {
    for (const plugin of this.list.plugins) await this.exec("CHECK", plugin, call, result)
  }

  /** DEL: every plugin in reverse order; the first failure is reported after all ran. */
  async del(call: Call, result: Result | undefined): Promise<void> {
    let first: unknown
    for (const plugin of [...this.list.plugins].reverse()) await this.exec("DEL", plugin, call, result).catch((e: unknown) => (first ??= e))
    if (first !== undefined) throw first
  }
}
