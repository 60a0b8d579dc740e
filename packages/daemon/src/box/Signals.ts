/** Signal names and numbers as the box speaks them: `TERM`, `SIGTERM` and `15` name one signal. */
import { constants as osConstants } from "node:os"

/** The number of a full signal name (`SIGTERM` → 15); undefined for an unknown name. */
export const signalNumber = (name: string): number | undefined =>
  (osConstants.signals as Record<string, number | undefined>)[name]

/** Normalise `"TERM"`, `"sigterm"` or `"15"` to `SIGTERM`; undefined for an unknown signal. */
export const signalOf = (name: string): string | undefined => {
  const upper = name.toUpperCase()
  if (/^\d+$/.test(upper)) {
    const n = Number(upper)
    return Object.keys(osConstants.signals).find((k) => signalNumber(k) === n)
  }
  const full = upper.startsWith("SIG") ? upper : `SIG${upper}`
  return signalNumber(full) === undefined ? undefined : full
}

/** The signal a shell-style exit code (128 + n) says the process died of. */
export const signalOfExit = (code: number): string | undefined =>
  code > 128 && code < 128 + 65 ? signalOf(String(code - 128)) : undefined

/** A child's exit as a shell reports it: its code, or 128 + the signal that ended it (SIGKILL when unknown). */
export const exitCodeOf = (code: number | null, signal: NodeJS.Signals | null): number =>
  code ?? 128 + (signal === null ? 9 : (signalNumber(signal) ?? 9))
