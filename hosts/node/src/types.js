// The package's plain types, as JSDoc: `npm run build:types` (tsc) turns them,
// with the rest of src/, into types/*.d.ts, and `npm run typecheck` checks every
// source against them. `Wit*` types are the WIT's own, from the jco bindings.

/** @typedef {import('../generated/interfaces/harness-jobs-types.js').JobSnapshot} WitJob */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').OutputLine} WitLine */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').RegistryError} WitRegistryError */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').JobSignal} JobSignal */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').WaitEnd} WaitEnd */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').WaitUntil} WaitUntil */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').OutputStream} OutputStream */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').ToolAnnotations} ToolAnnotations */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').UiCard} UiCard */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').PromptSection} PromptSection */
/** @typedef {import('../generated/interfaces/harness-jobs-notices.js').Notice} Notice */
/** @typedef {import('../generated/interfaces/harness-jobs-notices.js').Lane} Lane */
/** @typedef {import('../generated/interfaces/harness-jobs-notices.js').Delivery} Delivery */
/** @typedef {import('../generated/interfaces/harness-jobs-notices.js').AgentStatus} AgentStatus */

/**
 * The component's configuration record, as `configure` returned it (pass it
 * back to every call; its numbers are BigInt).
 * @typedef {import('../generated/interfaces/harness-jobs-tools.js').Config} GuestConfig
 */

/**
 * A WIT `registry-error` case.
 * @typedef {WitRegistryError['tag']} RegistryErrorTag
 */

/** @typedef {'running' | 'stopping' | 'completed' | 'killed' | 'failed'} JobStatus */

/**
 * A job as a registry shows it: the WIT `job-snapshot` in camel case, with
 * times (ms since the epoch) and sizes as numbers.
 * @typedef {object} Job
 * @property {string} id
 * @property {string} kind
 * @property {string} label
 * @property {JobStatus} status
 * @property {string} [detail]
 * @property {number} startedAt
 * @property {number} [finishedAt]
 * @property {number} [outputLimitBytes]
 * @property {boolean} reported
 * @property {Sandbox | null} [sandbox] the host's sandbox around the job; none: full authority
 * @property {string | null} [placement] where the job runs when not on this host (extension `runners`)
 */

/**
 * A job's sandbox, as a config writes it.
 * @typedef {object} Sandbox
 * @property {'full' | 'workspace-write' | 'read-only'} files
 * @property {'on' | 'off' | number[]} network
 */

/**
 * What `output` is asked for: the whole output if it has at most `wholeUpTo`
 * bytes, else its first `headBytes` and last `tailBytes`.
 * @typedef {object} ExcerptWindow
 * @property {number} wholeUpTo
 * @property {number} headBytes
 * @property {number} tailBytes
 */

/**
 * @typedef {object} OutputExcerpt
 * @property {string} head
 * @property {string} tail
 * @property {number} omittedBytes
 * @property {Job} job
 */

/** @typedef {'requested' | 'already-finished'} KillOutcome */

/**
 * One line of retained output (the `log` extension).
 * @typedef {object} OutputLine
 * @property {OutputStream} stream
 * @property {number} number
 * @property {string} text
 */

/**
 * A `lines` query as plain numbers.
 * @typedef {{ tag: 'range', val: { stream: OutputStream, start: number, count: number } }
 *   | { tag: 'last', val: { stream: OutputStream, count: number } }
 *   | { tag: 'search', val: { stream?: OutputStream, pattern: string, context: number, maxMatches: number } }} LineQuery
 */

/**
 * @typedef {object} LinePage
 * @property {OutputLine[]} lines
 * @property {ArrayLike<number>} hits
 * @property {number} totalMatches
 * @property {{ stream: OutputStream, totalBytes: number, droppedBytes: number, firstLine: number, lastLine: number }[]} extents
 * @property {{ stream: OutputStream, line: number } | null} [stopped]
 * @property {Job} job
 */

/**
 * What the guest may ask of a registry, for one caller at a time. A method
 * that fails as the contract expects throws a RegistryError. The last four
 * serve the opt-in extensions; a backend without one answers `unsupported`.
 * @typedef {object} Backend
 * @property {(caller: string | null) => Job[]} listJobs
 * @property {(caller: string | null, jobId: string) => Job} get
 * @property {(caller: string | null, jobId: string) => { text: string, job: Job }} read
 * @property {(caller: string | null, jobId: string, reason?: string) => KillOutcome} kill
 * @property {(caller: string | null, jobId: string, window: ExcerptWindow) => OutputExcerpt} output
 * @property {() => number} nowMs
 * @property {(caller: string | null, jobId: string, data: string, close: boolean) => number} [writeInput]
 * @property {(caller: string | null, jobId: string, name: JobSignal) => void} [signal]
 * @property {(caller: string | null, jobId: string, query: LineQuery) => LinePage} [lines]
 * @property {(caller: string | null, jobId: string) => { address: string, port: number }[]} [ports]
 * @property {(caller: string | null, jobId: string, size: TerminalSize) => void} [resize]
 * @property {(caller: string | null, jobId: string) => TerminalScreen} [screen]
 */

/**
 * A job's terminal size (the `terminal` extension).
 * @typedef {object} TerminalSize
 * @property {number} rows
 * @property {number} cols
 */

/**
 * What a job's terminal shows (the `terminal` extension).
 * @typedef {object} TerminalScreen
 * @property {TerminalSize} size
 * @property {string[]} lines
 * @property {number} cursorRow
 * @property {number} cursorCol
 * @property {boolean} alternate
 * @property {Job} job
 */

/**
 * A wait's outcome with its end said: `matched` only for a ready wait that
 * saw its pattern.
 * @typedef {object} WaitOutcome
 * @property {Job} job
 * @property {WaitEnd} [end]
 * @property {{ line: OutputLine, before: OutputLine[] } | undefined} [matched]
 * @property {string | undefined} [prompt]
 */

/**
 * A tool call's result. `value` is the parsed structured result, or null.
 * @typedef {object} ToolResult
 * @property {string} text
 * @property {boolean} isError
 * @property {unknown} value
 */

/**
 * A tool as MCP lists it (schemas parsed).
 * @typedef {object} ToolDefinition
 * @property {string} name
 * @property {string} description
 * @property {object} inputSchema
 * @property {object | null} outputSchema
 * @property {ToolAnnotations} annotations MCP tool annotations: a title and the behaviour hints.
 */

/**
 * What the guest asks the host to wait for before it resumes the call.
 * @typedef {object} WaitRequest
 * @property {string} jobId
 * @property {number} timeoutMs
 * @property {WaitUntil} [until] `{ pattern, quietMs }` for a ready wait
 */

/**
 * One step of a call: done, or a wait to run before the next step.
 * @typedef {{ done: ToolResult, wait?: undefined } | { wait: WaitRequest, done?: undefined }} Step
 */

/** @typedef {{ text: string } | { other: string }} ContentBlock */

/**
 * An owner's state when a notice is decided on.
 * @typedef {object} OwnerState
 * @property {AgentStatus} status
 * @property {number} wakesSpent
 */

export {};
