/** The POSIX signals the memory runtime knows, by name and number. */
import type * as Runtime from "../Runtime.js"

/** Signal numbers by name (Linux). */
export const signalNumbers: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGTERM: 15
}

/** Normalise `"TERM"`, `"SIGTERM"` or `"15"` to `SIGTERM`; `undefined` for unknown names. */
export const signalName = (signal: string): string | undefined => {
  if (/^\d+$/.test(signal)) {
    const n = Number(signal)
    return Object.keys(signalNumbers).find((k) => signalNumbers[k] === n)
  }
  const name = signal.toUpperCase().startsWith("SIG") ? signal.toUpperCase() : `SIG${signal.toUpperCase()}`
  return name in signalNumbers ? name : undefined
}

/** The signal a container's spec stops it with (SIGTERM unless it names a known one). */
export const stopSignalOf = (spec: Pick<Runtime.ContainerSpec, "stopSignal">): string =>
  signalName(spec.stopSignal ?? "SIGTERM") ?? "SIGTERM"
