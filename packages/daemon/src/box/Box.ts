/**
 * The `box` role: the built-in kbox-compatible runtime daemon (DESIGN §1, §8). It opens its
 * data dir (adopting the containers a previous box left running), serves the kbox API on a
 * Unix socket, and on SIGTERM/SIGINT stops serving and exits 0. Containers keep running when
 * the box stops: the next box adopts them.
 *
 *   flags ─▶ ProcessDriver.open (lock, load, re-adopt) ─▶ KboxServer.serve (socket 0600) ─▶ wait for a signal
 */
import type { Runtime } from "@koder/fleet-core"
import type { Runtime as EffectRuntime } from "effect"
import { homedir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { parseArgs } from "node:util"
import * as KboxServer from "./KboxServer.js"
import * as RuncDriver from "./RuncDriver.js"
import { ProcessDriver, toRuntime } from "./ProcessDriver.js"
import * as ShimFlag from "./ShimFlag.js"

/** What the box is configured with. */
export interface Config {
  readonly socketPath: string
  readonly dataDir: string
  readonly driver: "process" | "runc"
  readonly isolation: "auto" | "none"
  readonly cgroups: "auto" | "none"
  readonly logMaxBytes: number
  readonly logMaxFiles: number
  /** The bridge of pods with their own network (`network: pod`; default `fleet0`). */
  readonly bridge?: string
  /** How the process driver starts containers: the native shim when it can (`auto`), or `sh`. */
  readonly shim?: ShimFlag.Shim
  /** Directories pods must not see (process driver, NodeHiding.ts), besides the box's own and its socket's. */
  readonly hide?: ReadonlyArray<string>
  /** The runc driver's registries.yaml (mirrors, HTTP endpoints, CAs, credentials). */
  readonly registries?: string
  /** Pod networks by CNI plugins (process driver, isolated): configuration and plugin directories. */
  readonly cni?: { readonly confDir: string; readonly binDirs: ReadonlyArray<string> }
  /** The runc driver's image GC thresholds (disk use percent). */
  readonly imageGc?: { readonly highPercent: number; readonly lowPercent: number }
}

/** `koder-fleet box --help`. */
export const usage = `usage: koder-fleet box [flags]

  --socket PATH            Unix socket to serve the kbox API on (default DIR/box.sock)
  --data-dir DIR           containers' state and logs (default ~/.koder-fleet/box, env FLEET_DATA_DIR/box)
  --driver process|runc    how containers run: process (default) supervises host processes; runc runs
                           OCI containers from imported images (root and runc needed)
  --isolation auto|none    auto: Linux namespaces per pod when root (default); none: plain processes
  --cgroups auto|none      auto: cgroup limits and accounting when root (default); none: /proc only
  --log-max-size BYTES     rotate a container's log beyond this size (default 10485760)
  --log-max-files N        rotated log files kept per container (default 2)
  --bridge NAME            the bridge pods with their own network namespace attach to (default fleet0;
                           isolated network mode: root, namespaces and iproute2)
  --shim auto|sh           auto: start containers with the native shim, built once with the machine's
                           C compiler (default; the sh chain without one); sh: always the sh chain
  --cni-conf-dir DIR       pods with their own network get it from the CNI plugins of the first network
                           configuration in DIR (*.conflist, else *.conf) instead of the built-in bridge
  --cni-bin-dir DIRS       where the CNI plugins are, colon-separated (default /opt/cni/bin:/usr/lib/cni)
  --registries FILE        how the runc driver reaches registries: k3s's registries.yaml (mirrors, http
                           endpoints, tls.ca_file, auth); read at every pull (default
                           FLEET_DATA_DIR/registries.yaml or ~/.koder-fleet/registries.yaml, if present)
  --image-gc-high-threshold PERCENT  above this disk use the runc driver removes images no container
                           holds, least recently pulled first (default 85, as the kubelet)
  --image-gc-low-threshold PERCENT   ... until disk use is below this (default 80)
  --hide DIR               a directory pods must not see (repeatable; always hidden: the data dir, the
                           socket's directory and FLEET_DATA_DIR or ~/.koder-fleet; see docs/box.md)`

/** Parse flags; a string is the error to print. */
export const parseFlags = (args: ReadonlyArray<string>): Config | string => {
  let values: Record<string, string | boolean | Array<string> | undefined>
  try {
    values = parseArgs({
      args: [...args],
      options: {
        socket: { type: "string" },
        "data-dir": { type: "string" },
        driver: { type: "string" },
        isolation: { type: "string" },
        cgroups: { type: "string" },
        "log-max-size": { type: "string" },
        "log-max-files": { type: "string" },
        bridge: { type: "string" },
        shim: { type: "string" },
        hide: { type: "string", multiple: true },
        registries: { type: "string" },
        "cni-conf-dir": { type: "string" },
        "cni-bin-dir": { type: "string" },
        "image-gc-high-threshold": { type: "string" },
        "image-gc-low-threshold": { type: "string" }
      },
      strict: true,
      allowPositionals: false
    }).values
  } catch (e) {
    return e instanceof Error ? e.message : String(e)
  }
  const str = (k: string) => (typeof values[k] === "string" ? (values[k] as string) : undefined)
  const fleetDir = resolve(process.env.FLEET_DATA_DIR ?? join(homedir(), ".koder-fleet"))
  const dataDir = resolve(str("data-dir") ?? join(fleetDir, "box"))
  const hide = Array.isArray(values.hide) ? values.hide.map((d) => resolve(d)) : []
  const driver = str("driver") ?? "process"
  if (driver !== "process" && driver !== "runc") return `--driver ${JSON.stringify(driver)}: expected process or runc`
  const isolation = str("isolation") ?? "auto"
  if (isolation !== "auto" && isolation !== "none") return `--isolation ${JSON.stringify(isolation)}: expected auto or none`
  const cgroups = str("cgroups") ?? "auto"
  if (cgroups !== "auto" && cgroups !== "none") return `--cgroups ${JSON.stringify(cgroups)}: expected auto or none`
  const shim = ShimFlag.parse(str("shim"))
  if (typeof shim === "string") return shim
  const count = (k: string, fallback: number, min: number) => {
    const v = str(k)
    if (v === undefined) return fallback
    const n = Number(v)
    return Number.isInteger(n) && n >= min ? n : `--${k} ${JSON.stringify(v)}: expected an integer >= ${min}`
  }
  const logMaxBytes = count("log-max-size", 10 * 1024 * 1024, 1024)
  if (typeof logMaxBytes === "string") return logMaxBytes
  const logMaxFiles = count("log-max-files", 2, 0)
  if (typeof logMaxFiles === "string") return logMaxFiles
  const percent = (k: string, fallback: number) => {
    const v = str(k)
    if (v === undefined) return fallback
    const n = Number(v)
    return Number.isInteger(n) && n >= 0 && n <= 100 ? n : `--${k} ${JSON.stringify(v)}: expected a percentage 0..100`
  }
  const highPercent = percent("image-gc-high-threshold", 85)
  if (typeof highPercent === "string") return highPercent
  const lowPercent = percent("image-gc-low-threshold", 80)
  if (typeof lowPercent === "string") return lowPercent
  if (lowPercent > highPercent) return `--image-gc-low-threshold ${lowPercent} must not be above --image-gc-high-threshold ${highPercent}`
  const socketPath = resolve(str("socket") ?? join(dataDir, "box.sock"))
  return {
    socketPath,
    dataDir,
    driver,
    isolation,
    cgroups,
    logMaxBytes,
    logMaxFiles,
    bridge: str("bridge") ?? "fleet0",
    shim: shim.shim,
    registries: resolve(str("registries") ?? join(fleetDir, "registries.yaml")),
    imageGc: { highPercent, lowPercent },
    ...(str("cni-conf-dir") === undefined
      ? {}
      : { cni: { confDir: resolve(str("cni-conf-dir")!), binDirs: (str("cni-bin-dir") ?? "/opt/cni/bin:/usr/lib/cni").split(":").filter((d) => d !== "").map((d) => resolve(d)) } }),
    // The socket's directory: a pod must not even find the socket (it is root's, 0600, anyway).
    hide: [dirname(socketPath), fleetDir, ...hide]
  }
}

/** A running box (the daemon, or embedded by `koder-fleet dev`). */
export interface Box {
  readonly info: Runtime.Info
  readonly runtime: Runtime.RuntimeService
  readonly socketPath: string
  /** How the process driver starts containers (`native`, or `sh` and why); undefined with runc. */
  readonly shim: string | undefined
  /** Stop serving; the containers keep running for the next box to adopt. */
  readonly close: () => Promise<void>
}

/** Open the driver and serve it; requests run on `fibers` (default: Effect's own runtime). */
export const start = async (config: Config, fibers?: EffectRuntime.Runtime<never>): Promise<Box> => {
  const logRotation = { maxBytes: config.logMaxBytes, maxFiles: config.logMaxFiles }
  const driver =
    config.driver === "runc"
      ? { ...RuncDriver.open({ dataDir: config.dataDir, logRotation, ...(config.registries === undefined ? {} : { registries: config.registries }), ...(config.imageGc === undefined ? {} : { imageGc: config.imageGc }) }), shim: undefined }
      : (() => {
          const d = ProcessDriver.open({ dataDir: config.dataDir, isolation: config.isolation, cgroups: config.cgroups, logRotation, ...(config.bridge === undefined ? {} : { bridge: config.bridge }), ...(config.shim === undefined ? {} : { shim: config.shim }), ...(config.hide === undefined ? {} : { hide: config.hide }), ...(config.cni === undefined ? {} : { cni: config.cni }) })
          return { runtime: toRuntime(d), info: d.info, shim: d.shim, close: () => d.close() }
        })()
  const runtime = driver.runtime
  let server: KboxServer.Handle
  try {
    server = await KboxServer.serve(runtime, config.socketPath, fibers)
  } catch (e) {
    driver.close()
    throw e
  }
  return {
    info: driver.info,
    shim: driver.shim,
    runtime,
    socketPath: config.socketPath,
    close: async () => {
      await server.close()
      driver.close()
    }
  }
}

/** `koder-fleet box ...`: returns the process exit code; requests run on `fibers` (the role's fiber scheduler). */
export const main = async (args: ReadonlyArray<string>, fibers?: EffectRuntime.Runtime<never>): Promise<number> => {
  // `koder-fleet box image import FILE --name NAME:TAG`: the image store, without a running box.
  if (args[0] === "image") return (await import("./Images.js")).cli(args.slice(1))
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage)
    return 0
  }
  const config = parseFlags(args)
  if (typeof config === "string") {
    console.error(`koder-fleet box: ${config}\n\n${usage}`)
    return 2
  }
  let box: Box
  try {
    box = await start(config, fibers)
  } catch (e) {
    console.error(`koder-fleet box: ${e instanceof Error ? e.message : String(e)}`)
    return 1
  }
  const caps = box.info.capabilities
  console.log(
    `koder-fleet box: serving the kbox API on ${box.socketPath} ` +
      `(driver process, isolation ${caps.isolation}, cgroups ${caps.cgroups}, pod network ${!caps.podNetwork ? "none" : config.cni !== undefined ? `by the CNI plugins of ${config.cni.confDir}` : `on bridge ${config.bridge ?? "fleet0"}`}, ` +
      `${box.shim === undefined ? "" : `shim ${box.shim}, `}data ${config.dataDir})`
  )
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", () => resolve())
    process.once("SIGINT", () => resolve())
  })
  await box.close()
  return 0
}
