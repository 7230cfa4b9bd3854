/* qhx.h: the public C API of qhexrt, a runtime for small hybrid and vision LLMs.
 *
 * This is the only public header. Everything not declared here is internal.
 * Conventions:
 *   - fallible calls return qhx_status (QHX_OK == 0) and fill a caller-owned qhx_error
 *     (may be NULL) with one line naming the file, field and byte offset at fault;
 *   - objects come back through OUT parameters, set to NULL on failure;
 *   - every *_free / *_close accepts NULL.
 */
#ifndef QHX_H
#define QHX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(QHX_BUILDING_LIBRARY)
#define QHX_API __attribute__((visibility("default")))
#else
#define QHX_API
#endif

/* A call kept under a former name: using it warns (GCC, Clang); its comment names the new one. */
#if defined(__GNUC__) || defined(__clang__)
#define QHX_DEPRECATED __attribute__((deprecated))
#else
#define QHX_DEPRECATED
#endif

/* ---- status codes ------------------------------------------------------ */
typedef enum qhx_status {
    QHX_OK = 0,
    QHX_E_ARG = 1,         /* invalid argument from the caller */
    QHX_E_IO = 2,          /* a file could not be opened, read, mapped or written */
    QHX_E_FORMAT = 3,      /* malformed input: JSON, safetensors, image, state file */
    QHX_E_UNSUPPORTED = 4, /* well-formed, but a feature this build does not support */
    QHX_E_NOMEM = 5,       /* allocation failed */
    QHX_E_LIMIT = 6,       /* a size cap or the context length would be exceeded */
    QHX_E_ABORTED = 7,     /* cancelled by the caller's callback */
    QHX_E_INTERNAL = 8     /* a bug: please report */
} qhx_status;

#define QHX_ERROR_MSG_SIZE 512

/* Caller-owned error detail. msg is always NUL-terminated (empty on success). */
typedef struct qhx_error {
    qhx_status code;
    char msg[QHX_ERROR_MSG_SIZE];
} qhx_error;

/* Static text for a status code ("ok", "invalid argument", ...). Never NULL. */
QHX_API const char *qhx_status_str(qhx_status code);

/* ---- version -------------------------------------------------------------
 * The header's version at compile time, and the library's at run time. A program built against
 * one header and run against another library compares the two (as sqlite3_libversion_number()
 * against SQLITE_VERSION_NUMBER):
 *
 *   if (!QHX_VERSION_COMPATIBLE(qhx_version_number()))
 *       fprintf(stderr, "built for qhexrt %s, running %s\n", QHX_VERSION, qhx_version());
 *
 * Before 1.0 the ABI may change with the minor version, so compatible = same major and minor
 * (the shared library's SONAME is libqhx.so.MAJOR.MINOR accordingly). CMakeLists.txt reads the
 * three numbers below; they are the only place the version is written. */
#define QHX_VERSION_MAJOR 0
#define QHX_VERSION_MINOR 8
#define QHX_VERSION_PATCH 0
#define QHX_VERSION "0.8.0"
#define QHX_VERSION_NUMBER (QHX_VERSION_MAJOR * 1000000 + QHX_VERSION_MINOR * 1000 + QHX_VERSION_PATCH)
#define QHX_VERSION_COMPATIBLE(number) ((number) / 1000 == QHX_VERSION_NUMBER / 1000)

/* The library's version string ("0.3.0") and number (QHX_VERSION_NUMBER of the header the
 * library was built with). */
QHX_API const char *qhx_version(void);
QHX_API int qhx_version_number(void);


/* ==== Usage ================================================================================
 *
 *   qhx_error err;
 *   qhx_model *model;
 *   if (qhx_model_open("bundle/qwen3.5-2b-1024.json", NULL, &model, &err)) { puts(err.msg); ... }
 *   qhx_session *s;
 *   qhx_session_params sp = qhx_session_default_params(model);
 *   qhx_session_create(model, &sp, &s, &err);
 *   qhx_prompt *p;                                                       // the prompt
 *   qhx_prompt_from_text(model, "The capital of France is", 24, &p, &err);
 *   size_t n;
 *   qhx_prompt_ids(p, &n);
 *   qhx_session_feed_prompt(s, p, 0, n, &err);
 *   qhx_prompt_free(p);
 *   qhx_generate_params gp = {.max_tokens = 32, .on_token = print_piece};
 *   qhx_session_generate(s, &gp, NULL, &err);                            // streams tokens
 *   qhx_session_free(s);
 *   qhx_model_free(model);
 *
 * Threads: a model is immutable after open and may be shared; different sessions may run
 * concurrently (each on the model's thread pool in turn); one session is not re-entrant.
 * Re-entrancy: from a callback of a call on a session (on_token, abort_cb), every feed,
 * generate, save and restore of the same session returns QHX_E_ARG, qhx_session_sample returns
 * -1 and qhx_session_reset does nothing; the read-only calls (n_past, n_ctx, logits, last_stop)
 * and every call on another session or on the model are allowed.
 * NULL: err may always be NULL. A NULL model, session, path, OUT pointer or array with a
 * non-zero count, where this header does not say NULL is allowed, returns QHX_E_ARG from a
 * fallible call; the accessors return 0 (counts, max context), NULL (logits), "?" (family
 * name), -1 (token id, sample) or QHX_STOP_LENGTH; *_free and *_reset do nothing. Enum fields
 * outside their listed values (a prefill mode, an ISA) are QHX_E_ARG. Pointers that are not
 * NULL must be valid: they are not checked.
 * Ownership: pointers returned by *_logits / *_name are borrowed (valid until the owner is
 * freed or the next mutating call on it); objects from *_open / *_create are owned and released
 * by the matching *_free, which accepts NULL. */

/* ==== Models =============================================================================== */

typedef int32_t qhx_token;
typedef struct qhx_model qhx_model;     /* immutable after open; shareable */
typedef struct qhx_session qhx_session; /* one sequence: all mutable state */

/* Instruction sets. QHX_ISA_BEST: the best the CPU and OS support; QHX_ISA_REF: the scalar
 * reference kernels (the oracle every SIMD variant is tested against). */
typedef enum qhx_isa { QHX_ISA_REF = 0, QHX_ISA_AVX2, QHX_ISA_AVX512, QHX_ISA_NEON, QHX_ISA_BEST } qhx_isa;

/* How weights reach memory. */
typedef enum qhx_weights_mode {
    QHX_WEIGHTS_DEFAULT = 0, /* per weight file: MMAP when the page cache already holds it (no copy,
                                no second copy in memory: 1.7-2.5 s instead of 13-20 s for 2.9 GB
                                on a KVM guest), READ when it does not (from disk either way, and
                                the huge-page copy decodes ~10 % faster). BENCHMARKS.md, "Weights
                                in memory" */
    QHX_WEIGHTS_MMAP = 1,    /* used in place from a read-only mapping, populated at open */
    QHX_WEIGHTS_READ = 2     /* read into anonymous memory, huge pages where available */
} qhx_weights_mode;

/* Arithmetic of the prompt (prefill) matmul of w8, q4 and q4a weights. Decode is not affected. */
typedef enum qhx_prefill_math {
    QHX_PREFILL_MATH_DEFAULT = 0, /* INT8 for q4 and q4a weights, F32 for w8 (BENCHMARKS.md,
                                     "int8-activation prefill GEMM": q4 gains speed at the same
                                     parity, w8 would double its KL for a few percent) */
    QHX_PREFILL_MATH_F32 = 1,     /* f32 activations, weights widened to f32: float32 rounding only */
    QHX_PREFILL_MATH_INT8 = 2     /* activations rounded to int8 per block of 32 columns, integer
                                     dot products (x86 AVX2 and AVX-512 tables, VNNI where the
                                     CPU has it; elsewhere the same as F32). Faster; the error
                                     bound is in docs/formats.md */
} qhx_prefill_math;

/* Element type of the KV cache (the attention keys and values a session keeps per position).
 * Attention math is f32 either way: keys are normalised and rotated in f32, then stored; F16
 * stores them rounded to nearest even and widens them back exactly when attending (half the
 * bytes; greedy-exact on every parity fixture, logits within ~2e-3 of f32: docs/architecture.md,
 * "The KV cache"). Q8 stores blocks of 32 values as int8 with an f32 scale (max |x| / 127),
 * 1.125 bytes a value; not greedy-exact on the fixtures (3 of 30 prompts diverge), so opt-in.
 * DEFAULT: the run plan's "kv_cache" (docs/manifest.md), else QHX_KV_F16.
 * A session file holds its cache's type; restoring it into a session of the other type fails. */
typedef enum qhx_kv_type { QHX_KV_DEFAULT = 0, QHX_KV_F32 = 1, QHX_KV_F16 = 2, QHX_KV_Q8 = 3 } qhx_kv_type;

typedef struct qhx_model_params {
    qhx_isa max_isa;          /* QHX_ISA_BEST by default */
    int n_threads;            /* 0: one per physical core */
    qhx_weights_mode weights; /* QHX_WEIGHTS_DEFAULT */
    qhx_prefill_math prefill_math; /* QHX_PREFILL_MATH_DEFAULT */
    /* Arithmetic of the decode (one token) matvec of q4 weights, the same three values: INT8
       rounds the activations to int8 per block of 32 columns as the int8 prefill does (x86
       AVX2 and AVX-512 tables; elsewhere the same as F32), F32 keeps them to 1.5e-5 of their
       block's largest value.
       DEFAULT = INT8 (BENCHMARKS.md, "Q4 decode on int8 activations"). w8 decode is not
       affected: it is bound by memory bandwidth either way. */
    qhx_prefill_math decode_math;
    int64_t max_context;      /* 0: the run plan's max_context */
    const char *backend;      /* NULL or "cpu", or a device of the build ("opencl", "opencl:N": qhx_devices_list); a QNN library path is refused (docs/backends.md) */
    qhx_kv_type kv_cache;     /* KV cache of the model's sessions: DEFAULT = the run plan's */
    /* NULL, or called on the opening thread while qhx_model_open brings the weight files into
       memory, after each step of at most 64 MiB: bytes so far and the total expected (the
       sizes of the plan's weight files; done can pass a short guess). For a progress line. */
    void (*load_progress)(void *user, uint64_t done_bytes, uint64_t total_bytes);
    void *load_progress_user;
    /* A Hugging Face checkpoint folder with a vision tower: 1 opens it for images (the tower is
       loaded, images can be fed), -1 for text only (the tower is never read), 0 (default) the
       family's choice: Qwen3-VL folders with images, Qwen3.5 folders text only. A manifest's
       host_op decides for itself (a bundle's -vlm- manifest takes images). */
    int vision;
    /* 1: also load the checkpoint's multi-token-prediction block (Qwen3.5 mtp.*), when it has
       one, for draft logits; 0 (default): its tensors are never read. */
    int mtp;
    /* A GGUF model (path is a .gguf file): NULL, or the GGUF file of its vision tower as
       llama.cpp writes it ("mmproj", architecture clip, the family's projector); the model then
       takes images. Read during qhx_model_open only; refused with any other model. */
    const char *mmproj;
} qhx_model_params;

QHX_API qhx_model_params qhx_model_default_params(void);

/* Since 0.8: the devices qhx_model_params.backend can name. */
typedef struct qhx_device_item {
    char name[32];              /* what backend takes: "cpu", "opencl:1"; a kind with none here: "opencl" */
    char description[256];      /* one line: the hardware, its kind, its driver; with none here, why */
    uint64_t memory_bytes;      /* the memory it can use (the CPU: physical memory); 0: unknown */
    uint64_t memory_free_bytes; /* of that, free now where the system or driver says; 0: unknown */
    int available;              /* 1: a device of this machine; 0: a kind of this build with none here */
} qhx_device_item;
/* Since 0.8: every device of this build on this machine: "cpu" first, then each kind's devices in
 * the order "KIND:N" counts them, and for a kind of the build with no device here (OpenCL without
 * a platform) one item with available 0 whose description says why. *out (owned:
 * qhx_devices_free) holds *n items. QHX_E_NOMEM only. */
QHX_API qhx_status qhx_devices_list(qhx_device_item **out /* OUT, owned: qhx_devices_free */, size_t *n,
                                    qhx_error *err);
QHX_API void qhx_devices_free(qhx_device_item *list); /* NULL is a no-op */
/* Since 0.8: how the devices of this build are named, for help and messages (static):
 * "cpu, opencl or opencl:N". */
QHX_API const char *qhx_devices_choices(void);
/* Since 0.8: 1 when name is a device name of this build ("cpu", "opencl", "opencl:2"; whether this
 * machine has that device is qhx_model_open's to say), else 0 (NULL: 0). */
QHX_API int qhx_device_name_valid(const char *name);

/* Open a model from a manifest (*.json), a bundle folder holding exactly one manifest, or a
 * Hugging Face checkpoint folder (config.json + *.safetensors + tokenizer.json). params may be
 * NULL. Returns QHX_OK, or QHX_E_IO / QHX_E_FORMAT / QHX_E_UNSUPPORTED / QHX_E_NOMEM /
 * QHX_E_LIMIT with err naming the file and field; *out is NULL on failure. */
QHX_API qhx_status qhx_model_open(const char *path, const qhx_model_params *params,
                                  qhx_model **out /* OUT, owned: qhx_model_free */, qhx_error *err);
/* Release the caller's model. The objects made from it (sessions, prompts, text streams,
 * constraints) each hold a reference of their own: the model's memory goes when the last of them
 * is freed, so
 * they stay usable, and may be freed, in any order after this call (thread-safe). The handle
 * itself must not be passed to any call afterwards. NULL is a no-op. */
QHX_API void qhx_model_free(qhx_model *model);

QHX_API const char *qhx_model_family_name(const qhx_model *model); /* "qwen3_5", "qwen3_vl" */
/* The family as people write it, for messages: "Qwen3.5", "Qwen3-VL". */
QHX_API const char *qhx_model_family_title(const qhx_model *model);
/* The run plan's host-op ("qwen3_vl_generate", ...) and whether it feeds images (1) or text only. */
QHX_API const char *qhx_model_host_op(const qhx_model *model);
QHX_API int qhx_model_takes_images(const qhx_model *model);
/* Whether the model's chat format has a thinking mode (--think / enable_thinking). */
QHX_API int qhx_model_has_thinking(const qhx_model *model);
/* How the model family's chat format marks what a front end reads in an answer. The strings
 * are the library's (static); NULL where the format has no such marker. model NULL: the
 * markers of the build's first family (for code that handles text without a model). */
typedef struct qhx_chat_markers {
    const char *turn_start;               /* the token that opens a turn (its role follows) */
    const char *turn_end;                 /* the token that ends a turn (and an answer) */
    const char *think_open, *think_close; /* a thinking block */
    const char *tool_open, *tool_close;   /* around one tool call in an answer */
    /* an answer forced to call a tool starts with tool_prefix (any function), or with
     * tool_prefix NAME tool_named (the function NAME) */
    const char *tool_prefix, *tool_named;
    /* a call written as blocks: tool_fn_open NAME '>', then per argument tool_param_open KEY '>'
     * VALUE tool_param_close (NULL when the format writes calls as one JSON object) */
    const char *tool_fn_open, *tool_param_open, *tool_param_close;
} qhx_chat_markers;
QHX_API void qhx_model_chat_markers(const qhx_model *model, qhx_chat_markers *out /* OUT */);
/* Bytes of KV cache one token of context takes in a session of this model (every attention
 * layer's keys and values in the model's KV element type); for sizing a context to memory. */
QHX_API int64_t qhx_model_kv_bytes_per_token(const qhx_model *model);
QHX_API int64_t qhx_model_n_vocab(const qhx_model *model);         /* logits per position */
/* The context a session gets by default: the run plan's max_context (a bundle's, or
 * min(4096, max_position_embeddings) for a checkpoint folder and for a bundle that keeps the
 * whole trained context, as forge makes them by default). */
QHX_API int64_t qhx_model_max_context(const qhx_model *model);
/* The longest context the model was trained for (config.json max_position_embeddings; the run
 * plan's max_context when the config does not say): the most n_ctx a session may ask for. */
QHX_API int64_t qhx_model_trained_context(const qhx_model *model);
/* The context policy of every front end (qhx generate, qhx chat, qhx serve), so one model gets
 * one context in all of them: requested > 0 is that context, refused (QHX_E_ARG, the message
 * naming it as `what`, e.g. "--ctx"; NULL: "context") past the trained context; 0: for a bundle
 * forged with a lower --max-context that context (qhx_model_max_context), else (a checkpoint
 * folder, a bundle that keeps the trained context) the trained context, lowered (to a multiple
 * of 256, at least 256) when the KV caches of n_sessions sessions would take more than half the
 * memory available now. */
typedef struct qhx_context_choice {
    int64_t n_ctx;   /* the context */
    int64_t trained; /* qhx_model_trained_context */
    int by_memory;   /* n_ctx was lowered to fit the memory */
    int by_request;  /* n_ctx is the requested one */
} qhx_context_choice;
QHX_API qhx_status qhx_model_choose_context(const qhx_model *model, int64_t requested, int n_sessions,
                                            const char *what, qhx_context_choice *out /* OUT */, qhx_error *err);
QHX_API int qhx_model_is_stop(const qhx_model *model, qhx_token token); /* 1 for a stop id */
/* The id of an exact token string (e.g. an added token such as qhx_chat_markers.turn_end), or -1. */
QHX_API qhx_token qhx_model_token_id(const qhx_model *model, const char *text);

/* ==== Text ================================================================================= */

/* Encode UTF-8 text (len bytes; invalid UTF-8 is refused with QHX_E_FORMAT naming the byte
 * offset). Writes at most cap ids; *n_out is the full count. When it exceeds cap, returns
 * QHX_E_LIMIT (cap == 0 with ids == NULL is a size query). */
QHX_API qhx_status qhx_tokenize(const qhx_model *model, const char *text, size_t len,
                                qhx_token *ids, size_t cap, size_t *n_out /* OUT */, qhx_error *err);
/* Decode ids to UTF-8 (special tokens included). Writes at most cap bytes plus a NUL when it
 * fits; *len_out is the full length (without NUL); QHX_E_LIMIT when cap <= length. An id
 * outside [0, qhx_model_n_vocab) is QHX_E_ARG; ids inside it the tokenizer lacks (padding rows
 * of the embedding) decode to nothing, as in the Hugging Face library. */
QHX_API qhx_status qhx_detokenize(const qhx_model *model, const qhx_token *ids, size_t n,
                                  char *buf, size_t cap, size_t *len_out /* OUT */, qhx_error *err);

typedef struct qhx_chat_msg {
    const char *role;    /* "system" (first only), "user" or "assistant" */
    const char *content; /* UTF-8, NUL-terminated */
} qhx_chat_msg;

/* Deprecated (since 0.6), as the other chat calls that grew by suffix (qhx_session_feed_text,
 * qhx_session_feed_chat/_chat_images, qhx_chat_format_image/_images,
 * qhx_session_chat_format/_images): a prompt is one object now, qhx_prompt ("Serving" below:
 * qhx_prompt_from_chat, qhx_prompt_for_session, qhx_prompt_from_text, qhx_prompt_text,
 * qhx_session_feed_prompt). They are kept, with the results, codes and messages they had, so that
 * programs written against 0.5 still build; each is a wrapper over the prompt object.
 * Render a conversation in the model family's chat format (ChatML). add_generation_prompt
 * ends it with the assistant header; thinking (Qwen3.5) opens the think block instead of
 * writing it closed and empty. Output as qhx_detokenize (size query with cap == 0). */
QHX_API QHX_DEPRECATED qhx_status qhx_chat_format(const qhx_model *model, const qhx_chat_msg *msgs, size_t n,
                                   int add_generation_prompt, int thinking, char *buf, size_t cap,
                                   size_t *len_out /* OUT */, qhx_error *err);

/* ==== Sessions ============================================================================= */

/* Sampling. Zero-initialised fields mean "off" (temperature 0 = greedy: argmax, lowest id on
 * ties). Applied in the order of the Hugging Face logits processors: repetition penalty,
 * presence and frequency penalties, temperature, top-k, top-p, min-p. The same seed gives the
 * same tokens at any thread count. */
typedef struct qhx_sample_params {
    float temperature;     /* <= 0: greedy */
    int32_t top_k;         /* 0: off */
    float top_p;           /* 0 or 1: off; else (0, 1) */
    float min_p;           /* 0: off; else (0, 1) */
    float repeat_penalty;  /* 0 or 1: off; else > 0 (logit > 0 ? logit / p : logit * p) */
    int32_t repeat_last_n; /* how many recent tokens the penalties see; 0: 64 */
    uint64_t seed;
    /* OpenAI-style penalties over the same recent tokens: a token seen c > 0 times loses
     * presence_penalty + c x frequency_penalty from its logit. 0: off; each in [-100, 100]. */
    float presence_penalty;
    float frequency_penalty;
} qhx_sample_params;

/* How a prompt goes through the model. */
typedef enum qhx_prefill_mode {
    QHX_PREFILL_CHUNKED = 0, /* batched projections + chunked delta rule (fast) */
    QHX_PREFILL_DECODE = 1   /* one token at a time through the decode path (the seed's way) */
} qhx_prefill_mode;

typedef struct qhx_session_params {
    int64_t n_ctx;     /* most tokens the session may hold; 0: qhx_model_max_context; at most
                          qhx_model_trained_context */
    int64_t n_batch;   /* most tokens per internal prefill step; 0: min(n_ctx, 512) */
    qhx_sample_params sampling;
    qhx_prefill_mode prefill;
    int (*abort_cb)(void *user); /* polled between layers and tokens; non-zero: QHX_E_ABORTED */
    void *abort_user;
    qhx_kv_type kv_cache; /* DEFAULT: the model's (qhx_model_params.kv_cache, else the plan's) */
    /* Speculative decoding with the model's multi-token-prediction block (the model opened with
       qhx_model_params.mtp = 1; QHX_E_UNSUPPORTED at create without one): at most spec_draft
       (1 to 8) draft tokens per step, 0 off. Output is the same as without it (greedy: token
       for token; sampling: the same distribution). spec_fixed 1: always spec_draft drafts; 0:
       the draft length follows the acceptance seen (docs/generation.md). */
    int spec_draft;
    int spec_fixed;
} qhx_session_params;

/* Defaults from the model's run plan (its generation defaults for sampling). */
QHX_API qhx_session_params qhx_session_default_params(const qhx_model *model);

/* Create a session (KV cache, recurrent state, scratch: all allocated here, once). params is
 * required; a prefill mode other than the two above, a negative n_ctx or n_batch: QHX_E_ARG. */
QHX_API qhx_status qhx_session_create(const qhx_model *model, const qhx_session_params *params,
                                      qhx_session **out /* OUT, owned: qhx_session_free */,
                                      qhx_error *err);
QHX_API void qhx_session_free(qhx_session *s); /* NULL is a no-op */
/* Start over: position 0, empty state, sampler reseeded. */
QHX_API void qhx_session_reset(qhx_session *s);
QHX_API int64_t qhx_session_n_past(const qhx_session *s); /* tokens in the state */
QHX_API int64_t qhx_session_n_ctx(const qhx_session *s);

/* Feed tokens (a prompt or a new chat turn) after what the session holds. QHX_E_LIMIT when
 * they would pass n_ctx (nothing is fed then); QHX_E_ARG for an id outside the vocabulary. */
QHX_API qhx_status qhx_session_feed(qhx_session *s, const qhx_token *ids, size_t n, qhx_error *err);
/* Tokenize and feed text. Deprecated (since 0.6): qhx_prompt_from_text + qhx_session_feed_prompt. */
QHX_API QHX_DEPRECATED qhx_status qhx_session_feed_text(qhx_session *s, const char *text, size_t len, qhx_error *err);
/* Deprecated (since 0.6): qhx_prompt_for_session (images as image_path parts of the last user
 * message) + qhx_session_feed_prompt.
 * Feed a chat prompt: msgs rendered in the model family's chat format, ending with the
 * assistant header (thinking: Qwen3.5's open think block). image_path (NULL for none) is
 * decoded, encoded and placed before the text of the last user message; it needs a model whose
 * host-op takes images (qhx_model_takes_images: Qwen3-VL; Qwen3.5 through a bundle's -vlm-
 * manifest or a checkpoint folder opened with qhx_model_params.vision = 1). The image takes at
 * most what the context leaves after the text and one token of answer (scaled down before its
 * encoder pass if needed). For a conversation that goes on in the same session, pass only the
 * new messages: the session closes the previous answer itself. */
QHX_API QHX_DEPRECATED qhx_status qhx_session_feed_chat(qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                                        const char *image_path, int thinking, qhx_error *err);
/* The same with several images: image_paths (n_images,), placed in that order before the text
 * of the last user message (n_images 0: none; at most 16). Their tokens together fit in what the
 * context leaves: when they would take more, the room is shared (an image needing less than an
 * equal share keeps its size, the others are scaled down to share the rest); QHX_E_LIMIT names
 * the counts when even the smallest sizes do not fit. Positions follow Hugging Face
 * get_rope_index across the images (docs/vision.md). A NULL path: QHX_E_ARG. */
QHX_API QHX_DEPRECATED qhx_status qhx_session_feed_chat_images(qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                                               const char *const *image_paths, size_t n_images,
                                               int thinking, qhx_error *err);
/* Logits (n_vocab,) after the last fed token. Borrowed until the next mutating call. */
QHX_API const float *qhx_session_logits(const qhx_session *s);
/* Sample the next token from the current logits with the session's sampler (not fed). -1
 * when the logits hold a NaN or +Inf (qhx_session_generate then fails with QHX_E_FORMAT). */
QHX_API qhx_token qhx_session_sample(qhx_session *s);
/* Since 0.7: sample the next answers with p instead of the sampling the session was created with
 * (a chat's "/set temperature 0.7"); the conversation stays, the penalties' window of recent
 * tokens starts empty. QHX_E_ARG (s unchanged) for values qhx_session_create would refuse, or
 * when called from a callback of the session's own call. */
QHX_API qhx_status qhx_session_set_sampling(qhx_session *s, const qhx_sample_params *p, qhx_error *err);

/* ---- embeddings (Since 0.8) ------------------------------------------------------------------
 * A text's embedding is the model's last hidden rows after its final norm (the rows the lm-head
 * reads, llama.cpp's embedding output), pooled over the text's tokens and then normalised. */
typedef enum qhx_pooling {
    QHX_POOLING_LAST = 0, /* the last token's row (what a causal model has read the whole text at) */
    QHX_POOLING_MEAN = 1, /* the mean of every token's row */
    QHX_POOLING_CLS = 2,  /* the first token's row */
} qhx_pooling;

typedef struct qhx_embed_params {
    qhx_pooling pooling;
    /* as llama.cpp's embd_normalize: -1 none, 0 max absolute scaled to 32760 (int16 range),
       1 taxicab, 2 Euclidean (the default), p > 2 the p-norm */
    int normalize;
} qhx_embed_params;

QHX_API qhx_embed_params qhx_embed_default_params(void); /* last token, Euclidean */
QHX_API int64_t qhx_model_n_embd(const qhx_model *model); /* an embedding's length (hidden size) */

/* The embedding of ids (n >= 1 tokens, one text) to out (n_out == qhx_model_n_embd floats). The
 * session is reset before and after: an embedding never sees what the session held, and the
 * session holds nothing afterwards. Refused (the session as it was): QHX_E_ARG (bad ids,
 * pooling, normalize, n_out; called from the session's own callback), QHX_E_LIMIT (n past the
 * session's context). QHX_E_UNSUPPORTED: a model without a final-norm graph. */
QHX_API qhx_status qhx_session_embed(qhx_session *s, const qhx_token *ids, size_t n, const qhx_embed_params *params,
                                     float *out, size_t n_out, qhx_error *err);

/* Called for each generated token with its text (complete UTF-8 only; may be empty while a
 * character is split across tokens). Return non-zero to stop after this token. */
typedef int (*qhx_token_cb)(void *user, qhx_token token, const char *text, size_t len);

typedef struct qhx_constraint qhx_constraint; /* a grammar over the output ("Constrained output") */

typedef struct qhx_generate_params {
    int64_t max_tokens;  /* > 0 */
    int ignore_stop;     /* do not stop on the run plan's stop ids */
    int stop_at_turn_end; /* also stop at the chat format's end-of-turn token (turn_end), as
                             a chat must whatever the run plan's stop ids are (the stop reason
                             is then QHX_STOP_TOKEN, and the token closes the turn) */
    qhx_token_cb on_token;
    void *user;
    /* NULL, or every generated token must continue the constraint's grammar from its state
       (tokens that cannot are masked before sampling; a stop or end-of-turn token only where
       the grammar may end, so the output is always a sentence of it unless cut by max_tokens
       or the callback). The constraint follows the tokens; the caller owns it. */
    qhx_constraint *constraint;
    /* Stop strings (n_stops, each non-empty; NULL for none), matched on the decoded text across
       token boundaries: on_token gets only text that can no longer be the start of one, and the
       answer ends (QHX_STOP_STRING) when one completes, its text and what follows never given.
       The token that completed it is reported (with the text before the string) and pending. */
    const char *const *stops;
    size_t n_stops;
    /* speculative decoding in this call (a session created with spec_draft): 0 the session's
       length, 1 to 8 at most that many drafts, -1 off. A constraint turns it off. */
    int spec_draft;
    /* Since 0.6: more stop tokens (n_stop_ids ids in [0, qhx_model_n_vocab); NULL for none): the
       answer ends at one as at the run plan's stop ids (QHX_STOP_TOKEN; the token is not
       reported and stays pending), ignore_stop or not. They turn speculative decoding off. */
    const qhx_token *stop_ids;
    size_t n_stop_ids;
} qhx_generate_params;

/* QHX_STOP_GRAMMAR: the constraint's output was complete and nothing (not even a stop token,
 * under ignore_stop) could follow. QHX_STOP_STRING: a stop string completed. */
typedef enum qhx_stop_reason {
    QHX_STOP_LENGTH = 0, QHX_STOP_TOKEN, QHX_STOP_CALLBACK, QHX_STOP_GRAMMAR, QHX_STOP_STRING
} qhx_stop_reason;

typedef struct qhx_generate_stats {
    int64_t n_prompt;      /* tokens fed by feed calls since the last generate */
    int64_t n_generated;   /* tokens returned through on_token */
    double prefill_ms, decode_ms;
    qhx_stop_reason stop;
    /* speculative decoding: verify passes, draft tokens proposed and accepted, and the tokens
       those passes gave (accepted drafts + one each); all 0 without it */
    int64_t n_verify, n_drafted, n_accepted, n_spec_tokens;
} qhx_generate_stats;

/* Generate up to max_tokens tokens after the fed prompt. The sampled stop token (if any) is
 * not reported; it is fed at the start of the next feed, so a chat continues in ChatML.
 * QHX_E_LIMIT before anything is generated when n_past + max_tokens would pass n_ctx.
 * stats may be NULL. */
QHX_API qhx_status qhx_session_generate(qhx_session *s, const qhx_generate_params *params,
                                        qhx_generate_stats *stats /* OUT */, qhx_error *err);

/* Why the last qhx_session_generate stopped (QHX_STOP_LENGTH before any). A chat front end
 * closes an answer cut by length with the end-of-turn token itself. */
QHX_API qhx_stop_reason qhx_session_last_stop(const qhx_session *s);

/* Save the session (state, position, sampler, history) to a file: versioned, checksummed,
 * written to a temporary file and renamed, readable by its owner only (it holds the
 * conversation). Restore refuses a file made for another model or a different n_ctx, a corrupt
 * or truncated file; the session is unchanged on failure. */
QHX_API qhx_status qhx_session_save(const qhx_session *s, const char *path, qhx_error *err);
QHX_API qhx_status qhx_session_restore(qhx_session *s, const char *path, qhx_error *err);

/* ==== For front ends ========================================================================
 * What a command-line or chat front end needs beyond the calls above: a few more facts about
 * the model, images encoded once and fed with ids the caller built, chat text with an image in
 * it, and the closing of an earlier answer. The qhx product commands (generate, chat) are built
 * on these and the calls above only. */

/* Whether the model has a tokenizer (a tokenizer.json or its binary form): without one, text
 * cannot be tokenized and chat turns cannot be fed, only ids. */
QHX_API int qhx_model_has_tokenizer(const qhx_model *model);
/* The run plan's default thinking mode for chat prompts (generation.thinking): 1 or 0. */
QHX_API int qhx_model_thinking_default(const qhx_model *model);
/* 1 when the default context (qhx_model_max_context) is the run plan's own, as for a manifest or
 * a bundle; 0 for a checkpoint folder, whose sessions may use the whole trained context
 * (qhx_model_trained_context) as far as memory allows. */
QHX_API int qhx_model_context_from_plan(const qhx_model *model);

/* The chat template the model's folder ships beside its tokenizer (chat_template.jinja,
 * chat_template.json or tokenizer_config.json's "chat_template"), or a GGUF file's
 * tokenizer.chat_template, against the released templates the built-in chat format was checked
 * against (tests/data/chat_templates). */
typedef enum qhx_chat_template_kind {
    QHX_CHAT_TEMPLATE_NONE = 0,  /* no template found (or a NULL model) */
    QHX_CHAT_TEMPLATE_KNOWN = 1, /* a released template the built-in format matches */
    QHX_CHAT_TEMPLATE_OTHER = 2, /* another one in the family's turn marks (a fine-tune's or a
                                    repackager's edit: the built-in format is close, not checked) */
    QHX_CHAT_TEMPLATE_FOREIGN = 3 /* a template without the family's turn marks: another chat
                                     format, which the built-in one would not reproduce */
} qhx_chat_template_kind;
/* sha256_hex: NULL, or 65 bytes that get the template's sha256 in hex when one is found. */
QHX_API qhx_chat_template_kind qhx_model_chat_template(const qhx_model *model, char *sha256_hex);

/* Deprecated (since 0.6): a render_only qhx_prompt with image_tokens parts, qhx_prompt_text.
 * As qhx_chat_format, with an image of image_tokens tokens (the format's image start, that
 * many image-pad tokens, its image end) before the text of the last user message; image_tokens 0:
 * no image (the same text as qhx_chat_format). QHX_E_ARG when image_tokens > 0 and no message
 * is a user message, or image_tokens is negative or above 2^20. */
QHX_API QHX_DEPRECATED qhx_status qhx_chat_format_image(const qhx_model *model, const qhx_chat_msg *msgs, size_t n,
                                         int add_generation_prompt, int thinking, int64_t image_tokens,
                                         char *buf, size_t cap, size_t *len_out /* OUT */, qhx_error *err);

/* Deprecated (since 0.6): a render_only qhx_prompt_for_session, qhx_prompt_text.
 * The text of a chat turn as qhx_session_feed_chat feeds it to this session: when the session
 * holds an earlier conversation, the closing of the last answer first (a line break after its
 * end-of-turn token, which the session feeds itself; after any other stop, the end-of-turn
 * marker too), then msgs as qhx_chat_format_image renders them with the assistant header.
 * Output as qhx_chat_format (size query with cap == 0). */
QHX_API QHX_DEPRECATED qhx_status qhx_session_chat_format(const qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                                           int thinking, int64_t image_tokens, char *buf, size_t cap,
                                           size_t *len_out /* OUT */, qhx_error *err);

/* An image decoded, preprocessed and run through the model's vision tower once (Qwen3-VL), to
 * be fed with ids the caller made (qhx_session_feed_image). */
typedef struct qhx_encoded_image qhx_encoded_image;

/* Load and encode the PNG or JPEG at path. max_tokens > 0: at most that many image tokens (the
 * image is scaled down before it is encoded; QHX_E_LIMIT when even the smallest size the
 * preprocessor allows takes more); 0: the preprocessor's own size. QHX_E_UNSUPPORTED, saying
 * why, for a model that takes no images (qhx_model_takes_images). */
QHX_API qhx_status qhx_encoded_image_load(const qhx_model *model, const char *path, int64_t max_tokens,
                                          qhx_encoded_image **out /* OUT, owned: qhx_encoded_image_free */,
                                          qhx_error *err);
/* The image's token count: the image-pad ids the prompt must hold for it (0 for NULL). */
QHX_API int64_t qhx_encoded_image_n_tokens(const qhx_encoded_image *image);
QHX_API void qhx_encoded_image_free(qhx_encoded_image *image); /* NULL is a no-op */

/* Feed ids as qhx_session_feed does, with image (NULL for none) at its pad tokens: the ids hold
 * the image start, qhx_encoded_image_n_tokens image-pad ids in one run, the image end. The
 * token the last generate left pending is fed first. Qwen3-VL without an image: the ids may hold
 * no image-pad id (QHX_E_ARG). Another family: an image is QHX_E_UNSUPPORTED. The image is only
 * read during the call. */
QHX_API qhx_status qhx_session_feed_image(qhx_session *s, const qhx_token *ids, size_t n,
                                          const qhx_encoded_image *image, qhx_error *err);

/* Several images in one prompt (at most 16), for both image families:
 * - qhx_chat_format_images / qhx_session_chat_format_images (deprecated since 0.6, as the two
 *   above): as qhx_chat_format_image /
 *   qhx_session_chat_format with image k of image_tokens[k] tokens (each in [1, 2^20]), the
 *   images in order before the text of the last user message (n_images 0: none);
 * - qhx_encoded_images_load: load and encode paths (n,) into out (n,) (each owned:
 *   qhx_encoded_image_free; all NULL on failure), every file decoded first; budget > 0 bounds
 *   their tokens together (an image needing less than an equal share keeps its size, the others
 *   share the rest and are scaled down before they are encoded; QHX_E_LIMIT naming the counts
 *   when even the smallest sizes do not fit), 0: no bound;
 * - qhx_session_feed_images: as qhx_session_feed_image with images (n_images,) in the order of
 *   their runs (image start, pads, image end) in ids, each run exactly
 *   qhx_encoded_image_n_tokens long (QHX_E_ARG naming the image and both counts otherwise).
 * Positions follow Hugging Face get_rope_index across the images (docs/vision.md). */
QHX_API QHX_DEPRECATED qhx_status qhx_chat_format_images(const qhx_model *model, const qhx_chat_msg *msgs, size_t n,
                                          int add_generation_prompt, int thinking, const int64_t *image_tokens,
                                          size_t n_images, char *buf, size_t cap, size_t *len_out /* OUT */,
                                          qhx_error *err);
QHX_API QHX_DEPRECATED qhx_status qhx_session_chat_format_images(const qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                                                  int thinking, const int64_t *image_tokens, size_t n_images,
                                                  char *buf, size_t cap, size_t *len_out /* OUT */, qhx_error *err);
QHX_API qhx_status qhx_encoded_images_load(const qhx_model *model, const char *const *paths, size_t n, int64_t budget,
                                           qhx_encoded_image **out /* OUT: n of them, each owned */, qhx_error *err);
QHX_API qhx_status qhx_session_feed_images(qhx_session *s, const qhx_token *ids, size_t n,
                                           const qhx_encoded_image *const *images, size_t n_images, qhx_error *err);

/* ==== Serving: prompts in memory, sampling, checkpoints, several sessions ==================
 * What a server needs beyond the calls above (qhx serve uses only this header):
 *   - a chat prompt with tools, tool calls, reasoning and encoded image bytes, rendered in the
 *     model's chat format and tokenized once (qhx_prompt), fed in pieces from any offset;
 *   - a sampler of its own per request (qhx_sampler_create), over the session's logits;
 *   - in-memory checkpoints of a session's state at a position, and rollback to one;
 *   - one decode step for several sessions at once (qhx_sessions_decode). */

/* A content part: text, or an image: the bytes of a PNG or JPEG file, the file's path, or (in a
 * prompt that is only rendered, qhx_chat_spec.render_only) its token count. */
typedef struct qhx_chat_content {
    const char *text;  /* UTF-8, text_len bytes; NULL for an image */
    size_t text_len;
    const void *image; /* encoded PNG/JPEG bytes, image_size bytes */
    size_t image_size;
    const char *image_path; /* or (image NULL) the PNG/JPEG file to load; such images share the
                               prompt's room (qhx_chat_spec.image_budget, max_tokens) */
    int64_t image_tokens;   /* render_only: the image's pad tokens, in [1, 2^20] */
    /* Video input (after 0.6.0: the struct grew at its end): */
    const char *video_path; /* or (text, image and image_path NULL) a video file: decoded with
                               FFmpeg, sampled and encoded as Qwen3-VL's video processor does,
                               rendered as the templates' video with the processor's per-group
                               timestamps (QHX_E_UNSUPPORTED in a build without FFmpeg); videos whose
                               tokens overflow the room are sampled with fewer frames, then fewer
                               pixels (qhx_prompt_video_stats; QHX_E_LIMIT when even 2 frames of
                               the fewest pixels overflow) */
    const void *video;      /* or (video_path NULL) the video file's bytes, video_size of them */
    size_t video_size;
} qhx_chat_content;

/* A tool call's argument as the chat template prints it (JSON text for an object or a list,
 * the string itself for a string, True/False/None, a number as Python writes it). */
typedef struct qhx_chat_call_arg {
    const char *name;
    const char *value;
} qhx_chat_call_arg;

typedef struct qhx_chat_call {
    const char *name;
    const qhx_chat_call_arg *args;    /* Qwen3.5: its arguments one by one, as printed */
    size_t n_args;
    const char *arguments;            /* Qwen3-VL: the arguments as one JSON text, printed as it
                                         is (an object as the template's tojson writes it:
                                         ", " and ": ", UTF-8 as is); NULL = "{}" */
} qhx_chat_call;

typedef struct qhx_chat_turn {
    const char *role;                 /* "system" (first only), "user", "assistant", "tool" */
    const char *content;              /* used when parts is NULL; NULL = "" */
    const qhx_chat_content *parts;    /* or the content as parts, in order */
    size_t n_parts;
    const char *reasoning;            /* assistant: its reasoning (Qwen3.5 think block; Qwen3-VL's
                                         template does not read it), or NULL */
    const qhx_chat_call *calls;       /* assistant: tool calls after its content */
    size_t n_calls;
} qhx_chat_turn;

typedef struct qhx_chat_spec {
    const qhx_chat_turn *turns;
    size_t n_turns;                   /* 1 .. 4096 */
    const char *const *tools;         /* tool definitions as JSON text (tojson); NULL for none */
    size_t n_tools;
    int thinking;                     /* Qwen3.5: open a think block after the assistant header */
    int64_t max_images;               /* most images (0: 1, the most one prompt can hold now) */
    int64_t max_image_pixels;         /* most decoded pixels per image (0: 16 Mpx), checked from
                                         the file header before any pixel buffer exists */
    int64_t max_image_tokens;         /* most tokens per encoded image (0: no cap) */
    const char *answer_prefix;        /* text the answer is forced to start with, rendered after
                                         the generation prompt as prompt ids (NULL: none) */
    int add_vision_id;                /* "Picture N: " before each image (the templates' option) */
    /* Since 0.6: */
    int no_generation_prompt;         /* 1: end after the last message, no assistant header */
    int render_only;                  /* 1: the text only (qhx_prompt_text): not tokenized (no
                                         tokenizer needed, no ids), images not loaded (each image
                                         part gives image_tokens) */
    /* The images loaded from files (image_path) share a room: when they would take more, an
     * image needing less than an equal share keeps its size and the others are scaled down
     * before they are encoded (QHX_E_LIMIT naming the counts when even the smallest sizes do not
     * fit). The room: what the prompt's other tokens leave of max_tokens (> 0) and, for
     * qhx_prompt_for_session, of the session's context after one token of answer (QHX_E_LIMIT
     * when they leave none), and at most image_budget (> 0). All 0 and no session: no bound. */
    int64_t max_tokens;
    int64_t image_budget;
    /* Video input (after 0.6.0): the videos' sampling (0: the checkpoint's video processor,
     * 2 frames per second, at most 768 frames) */
    double video_fps;
    int64_t video_max_frames;
} qhx_chat_spec;

/* A tokenized prompt with its encoded images (owned: qhx_prompt_free). */
typedef struct qhx_prompt qhx_prompt;

/* Render spec in the model's chat format ending with the assistant header, tokenize it and
 * encode its images. Errors: QHX_E_ARG (roles, a system message not first, images the
 * family does not take, an image outside a user or tool message), QHX_E_FORMAT (invalid UTF-8, an
 * image that does not decode), QHX_E_LIMIT (caps above), QHX_E_NOMEM. */
QHX_API qhx_status qhx_prompt_from_chat(const qhx_model *model, const qhx_chat_spec *spec,
                                        qhx_prompt **out /* OUT, owned */, qhx_error *err);
/* The next turn of the conversation s holds, as qhx_prompt_from_chat makes it for s's model:
 * when s holds an earlier answer, its closing first (a line break after its end-of-turn token,
 * which the session feeds itself; after any other stop, the end-of-turn marker too); the text is
 * refused (QHX_E_LIMIT) before it is tokenized when it cannot fit in what the context leaves,
 * and tokenizing polls s's abort callback (QHX_E_ABORTED). Feed it with qhx_session_feed_prompt
 * from 0 (the ids follow what s holds). s is only read. */
QHX_API qhx_status qhx_prompt_for_session(const qhx_session *s, const qhx_chat_spec *spec,
                                          qhx_prompt **out /* OUT, owned */, qhx_error *err);
/* A prompt of text as it is (len bytes, no chat format), tokenized. */
QHX_API qhx_status qhx_prompt_from_text(const qhx_model *model, const char *text, size_t len,
                                        qhx_prompt **out /* OUT, owned */, qhx_error *err);
/* The prompt's text (borrowed, lives with p; NUL-terminated) and its length in bytes: what was
 * tokenized (a prompt of ids has none: ""). */
QHX_API const char *qhx_prompt_text(const qhx_prompt *p, size_t *len /* OUT */);
/* A prompt of plain ids (checked against the vocabulary). */
QHX_API qhx_status qhx_prompt_from_ids(const qhx_model *model, const qhx_token *ids, size_t n,
                                       qhx_prompt **out /* OUT, owned */, qhx_error *err);
QHX_API void qhx_prompt_free(qhx_prompt *p);
/* The ids (borrowed, lives with p) and their count. */
QHX_API const qhx_token *qhx_prompt_ids(const qhx_prompt *p, size_t *n /* OUT */);
/* Index of the first id that stands for an image (its run's start), or the count when there is
 * none: a state holding a prefix of the ids up to there can be reused for another prompt. */
QHX_API size_t qhx_prompt_reusable(const qhx_prompt *p);
/* What the prompt's videos took (since 0.8; summed over its videos, all 0 without one): the
 * frames sampled, the last video's grid (temporal groups, patches per side), the pad tokens, and
 * the time spent decoding the files (demuxing, decoding, converting to RGB), preprocessing the
 * sampled frames (resize, normalise, patch) and running the vision tower. When the videos'
 * tokens did not fit the room (qhx_chat_spec.max_tokens, the session's context), fitted is 1 and
 * the sampling was lowered to what fits: at most max_frames frames per video (from
 * frames_asked over all videos), and, when even the fewest frames did not fit, the pixel budget
 * of all of a video's frames together (the processor's size.longest_edge) from max_pixels_asked
 * to max_pixels (0: not lowered). */
typedef struct qhx_prompt_video_stats {
    int n_videos;
    int64_t frames, grid_t, grid_h, grid_w, n_tokens;
    double decode_ms, preprocess_ms, vision_ms;
    int fitted;
    int64_t frames_asked, max_frames;
    int64_t max_pixels_asked, max_pixels;
} qhx_prompt_video_stats;
QHX_API void qhx_prompt_video_stats_get(const qhx_prompt *p, qhx_prompt_video_stats *out /* OUT */);
/* Feed ids [from, to) of p after what s holds; s must hold exactly ids [0, from) of a prompt
 * that shares them. A range holding the image's ids holds all of them (from <=
 * qhx_prompt_reusable). The token the last generate left pending is fed first. A range without
 * the images may hold no image-pad id (Qwen3-VL: QHX_E_ARG, as qhx_session_feed_image without an
 * image). Errors as qhx_session_feed; QHX_E_ARG for a range outside the ids or cutting through
 * the image. */
QHX_API qhx_status qhx_session_feed_prompt(qhx_session *s, const qhx_prompt *p, size_t from, size_t to,
                                           qhx_error *err);

/* A sampler with its own parameters and seed (qhx_sample_params), for one request. The
 * penalties see the tokens passed to qhx_sampler_push (the recent prompt, then each token
 * chosen). Owned: qhx_sampler_free. */
typedef struct qhx_sampler_handle qhx_sampler_handle;
QHX_API qhx_status qhx_sampler_create(const qhx_model *model, const qhx_sample_params *params,
                                      qhx_sampler_handle **out /* OUT, owned */, qhx_error *err);
QHX_API void qhx_sampler_free(qhx_sampler_handle *smp);
/* Deprecated (since 0.5): the former names of qhx_sampler_create and qhx_sampler_free, kept so
 * that programs written against 0.4 still build; they call the new ones. */
QHX_API QHX_DEPRECATED qhx_status qhx_sampler_new(const qhx_model *model, const qhx_sample_params *params,
                                                  qhx_sampler_handle **out /* OUT, owned */, qhx_error *err);
QHX_API QHX_DEPRECATED void qhx_sampler_delete(qhx_sampler_handle *smp);
QHX_API void qhx_sampler_push(qhx_sampler_handle *smp, qhx_token token);
/* The next token from logits (qhx_model_n_vocab values); -1 when they hold a NaN or +Inf. */
QHX_API qhx_token qhx_sampler_pick(qhx_sampler_handle *smp, const float *logits);

/* Generation steps: the loop qhx_session_generate runs, one token at a time, for a front end
 * that steps its sessions itself (a server batching several with qhx_sessions_decode). A
 * decoder is one answer: its sampler (penalties over the tokens pushed and chosen), the
 * constraint, the stop ids and end-of-turn token, stop strings across token boundaries, the
 * streaming text, max_tokens and cancellation, exactly as qhx_session_generate applies them.
 * Owned: qhx_decoder_free. */
typedef struct qhx_decoder qhx_decoder;
typedef struct qhx_decoder_params {
    qhx_sample_params sampling;
    int64_t max_tokens;          /* > 0: the answer ends (QHX_STOP_LENGTH) after that many */
    int ignore_stop;             /* as qhx_generate_params */
    int stop_at_turn_end;
    const char *const *stops;    /* as qhx_generate_params; borrowed for the decoder's life */
    size_t n_stops;
    qhx_constraint *constraint;  /* borrowed, NULL for none */
    int (*abort_cb)(void *user); /* polled before each step: non-zero -> QHX_E_ABORTED */
    void *abort_user;
    int speculative;             /* the answer is decoded with qhx_decoder_spec_step: the
                                    speculative step keeps the penalty window (the decoder adds
                                    none of its tokens to it) */
    const qhx_token *stop_ids;   /* as qhx_generate_params (since 0.6); borrowed */
    size_t n_stop_ids;
} qhx_decoder_params;
QHX_API qhx_status qhx_decoder_create(const qhx_model *model, const qhx_decoder_params *params,
                                      qhx_decoder **out /* OUT, owned */, qhx_error *err);
QHX_API void qhx_decoder_free(qhx_decoder *d); /* NULL is a no-op */
/* Record prompt tokens for the penalties' window. */
QHX_API void qhx_decoder_push(qhx_decoder *d, const qhx_token *ids, size_t n);
typedef struct qhx_decoder_step {
    qhx_token token;     /* the chosen token, -1 when none (the grammar's output was complete) */
    int report;          /* the token is part of the answer: pass it and text on */
    int feed;            /* the answer goes on: feed token to the session, then step again */
    const char *text;    /* the text that became final with it (borrowed until the next call) */
    size_t len;
    qhx_stop_reason stop; /* !feed: why the answer ended (a stop token is not reported) */
} qhx_decoder_step;
/* One step from logits (qhx_model_n_vocab values, e.g. qhx_session_logits). Errors:
 * QHX_E_ABORTED (abort_cb), QHX_E_FORMAT (NaN or Inf in the logits), a constraint's error,
 * QHX_E_NOMEM; QHX_E_ARG after the answer ended. */
QHX_API qhx_status qhx_decoder_next(qhx_decoder *d, const float *logits, qhx_decoder_step *out /* OUT */,
                                    qhx_error *err);
/* One step with a token chosen elsewhere (a speculative step's, below): cancellation, then the
 * stop checks, text, stop strings and count that qhx_decoder_next applies after its choice. */
QHX_API qhx_status qhx_decoder_accept(qhx_decoder *d, qhx_token t, qhx_decoder_step *out /* OUT */, qhx_error *err);
/* qhx_session_spec_step / qhx_session_spec_cut (below) with the decoder's sampler, end-of-turn
 * token and ignore_stop (a decoder created with speculative = 1). */
QHX_API qhx_status qhx_decoder_spec_step(qhx_decoder *d, qhx_session *s, qhx_token t, int room, int draft,
                                         qhx_token *out, int *n_out, qhx_error *err);
QHX_API qhx_status qhx_decoder_spec_cut(qhx_decoder *d, qhx_session *s, int k, qhx_error *err);
/* At the end of the answer: the text still held (an incomplete UTF-8 tail, a possible start of a
 * stop string), borrowed until the decoder is freed. */
QHX_API qhx_status qhx_decoder_finish(qhx_decoder *d, const char **text, size_t *len, qhx_error *err);

/* Stop strings over a stream of text on their own (what the decoder applies): push text, get
 * what can no longer be the start of one; 1 when one completed (the text before it was given,
 * nothing more is), 0 to go on, -1 out of memory. The strings are borrowed. */
typedef struct qhx_stop_matcher qhx_stop_matcher;
QHX_API qhx_status qhx_stop_matcher_create(const char *const *stops, size_t n, qhx_stop_matcher **out /* OUT */,
                                           qhx_error *err);
QHX_API int qhx_stop_matcher_push(qhx_stop_matcher *sm, const char *text, size_t len, const char **out,
                                  size_t *out_len);
/* The end: what is still held (0), or the text up to a stop string completing in it (1). */
QHX_API int qhx_stop_matcher_finish(qhx_stop_matcher *sm, const char **out, size_t *out_len);
QHX_API void qhx_stop_matcher_free(qhx_stop_matcher *sm);

/* Streaming detokenizer: push ids, get the text each completes (never half a UTF-8
 * sequence); the concatenation of every push and the final flush is qhx_detokenize of all.
 * Owned: qhx_text_stream_free. */
typedef struct qhx_text_stream qhx_text_stream;
QHX_API qhx_status qhx_text_stream_new(const qhx_model *model, qhx_text_stream **out /* OUT */,
                                       qhx_error *err);
/* *text (borrowed until the next call on st) / *len: the text completed by token. */
QHX_API qhx_status qhx_text_stream_push(qhx_text_stream *st, qhx_token token, const char **text,
                                        size_t *len, qhx_error *err);
QHX_API qhx_status qhx_text_stream_flush(qhx_text_stream *st, const char **text, size_t *len,
                                         qhx_error *err);
QHX_API void qhx_text_stream_free(qhx_text_stream *st);

/* A copy of what a session's state needs to return to its current position: the recurrent
 * state (Qwen3.5's conv and SSM states, Qwen3-VL's next position), the position and the
 * logits. The KV cache rows are not copied: rows below the position stay valid as long as the
 * session only appends after it, so a rollback is valid while nothing was fed at a position
 * below the checkpoint's since it was taken (the caller keeps that rule: after rolling back
 * to an earlier checkpoint and feeding, drop the later ones). Owned: qhx_checkpoint_free. */
typedef struct qhx_checkpoint qhx_checkpoint;
QHX_API qhx_status qhx_session_checkpoint(qhx_session *s, qhx_checkpoint **out /* OUT, owned */,
                                          qhx_error *err);
/* Return s to the checkpoint (taken on s; QHX_E_ARG for another session's). */
QHX_API qhx_status qhx_session_rollback(qhx_session *s, const qhx_checkpoint *cp, qhx_error *err);
QHX_API int64_t qhx_checkpoint_n_past(const qhx_checkpoint *cp);
QHX_API size_t qhx_checkpoint_bytes(const qhx_checkpoint *cp);
QHX_API void qhx_checkpoint_free(qhx_checkpoint *cp);

/* The most sessions one batched decode step takes together (more are fed one by one). */
#define QHX_MAX_BATCH 64

/* One decode step for n sessions of one model: tokens[i] is fed to sessions[i] (each then has
 * the logits after it), with the result (bit for bit) of qhx_session_feed of its token alone.
 * Where the family has a batched step (Qwen3.5, Qwen3-VL) and every session is idle with
 * nothing pending, the n tokens go through one forward whose linear layers read their weights
 * once for all of them; otherwise the sessions are fed one after the other. Sessions must be distinct (a repeated
 * one is QHX_E_ARG, before anything is fed). On failure some sessions may have been fed: *n_done
 * (may be NULL) says how many, in order. */
QHX_API qhx_status qhx_sessions_decode(qhx_session *const *sessions, const qhx_token *tokens,
                                       size_t n, size_t *n_done /* OUT */, qhx_error *err);

/* Speculative decoding for a front end with its own loop (a session created with spec_draft;
 * docs/generation.md). A step feeds t (the token chosen after the session's state) and the MTP
 * block's accepted drafts: out (room >= 1) gets *n_out tokens, out[0 .. *n_out - 1) fed after
 * t and out[*n_out - 1] the next token, not fed; the session's logits are then those after the
 * last fed token. At most draft (1 .. 8, capped by the session's spec_draft) drafts; the step
 * ends early at a stop token of the model or turn_end (-1: none) unless ignore_stop. smp: the
 * generation's sampler, whose penalty window must hold the tokens before t; the step adds t and
 * the fed outputs to it (do not push them). qhx_session_spec_cut right after keeps out[0 .. k)
 * fed (out[k] then not fed), with smp's window cut the same way. Several sessions step
 * together with qhx_sessions_spec_step (below). Sessions with speculation are not batched by
 * qhx_sessions_decode (they are fed one by one) until their adaptive rule has retired
 * (qhx_session_spec_retired: drafting did not pay; the MTP block no longer follows the
 * session until it is reset), from then on they are. */
QHX_API int qhx_session_spec_enabled(const qhx_session *s);
QHX_API int qhx_session_spec_retired(const qhx_session *s);
QHX_API qhx_status qhx_session_spec_step(qhx_session *s, qhx_sampler_handle *smp, qhx_token t, int room, int draft,
                                         qhx_token turn_end, int ignore_stop, qhx_token *out, int *n_out,
                                         qhx_error *err);
QHX_API qhx_status qhx_session_spec_cut(qhx_session *s, qhx_sampler_handle *smp, int k, qhx_error *err);
/* One speculative step of several sessions of one model at once: each drafts with its MTP
 * block, then one verify pass of the main model covers the drafts of all (every weight read
 * once for all their rows; one pass per QHX_MAX_BATCH rows), then each accepts and cuts back.
 * Each session gets exactly what its own qhx_session_spec_step (or qhx_decoder_spec_step)
 * gives; the adaptive rule times each session's step as its own drafts and acceptance plus
 * the whole shared verify pass (docs/generation.md). An item names the session and either a decoder (created with
 * speculative = 1: its sampler, end-of-turn token and ignore_stop) or a sampler with turn_end
 * and ignore_stop; qhx_session_spec_cut may follow for each. Results per item: status and
 * error (a session's failure leaves the others' steps done), n_out on success. Returns QHX_OK
 * when every item succeeded, else the first failure's status. At most QHX_MAX_BATCH items,
 * each session once; not re-entrant for any of them. */
typedef struct qhx_spec_step_item {
    qhx_session *session;
    qhx_decoder *decoder;          /* NULL: sampler, turn_end and ignore_stop below */
    qhx_sampler_handle *sampler;
    qhx_token turn_end;
    int ignore_stop;
    qhx_token token;               /* t of qhx_session_spec_step */
    int room, draft;               /* as qhx_session_spec_step */
    qhx_token *out;                /* room entries */
    int n_out;                     /* OUT */
    qhx_status status;             /* OUT */
    qhx_error error;               /* OUT */
} qhx_spec_step_item;
QHX_API qhx_status qhx_sessions_spec_step(qhx_spec_step_item *items, size_t n);
/* The session's totals so far: verify steps, drafts proposed, accepted, tokens the steps gave. */
QHX_API void qhx_session_spec_totals(const qhx_session *s, int64_t out[4]);

/* ==== Constrained output ====================================================================
 * A grammar (GBNF, or a JSON Schema of the subset in docs/grammar.md, compiled into one) and
 * a constraint: the grammar's state over one output of a model's vocabulary. Tokens whose bytes
 * cannot continue a sentence of the grammar are masked before sampling (exactly, byte by
 * byte: a token may end inside a UTF-8 character or span several of the grammar's terminals);
 * the model's stop and end-of-turn tokens are allowed only where the grammar may end. */

typedef struct qhx_grammar qhx_grammar; /* immutable; may be shared between threads */

/* GBNF text (len bytes; root: the start rule, NULL = "root"). QHX_E_FORMAT with the line and
 * column, an undefined or left-recursive rule named; QHX_E_LIMIT past the caps. */
QHX_API qhx_status qhx_grammar_parse(const char *gbnf, size_t len, const char *root,
                                     qhx_grammar **out /* OUT, owned: qhx_grammar_free */, qhx_error *err);
/* A JSON Schema (JSON text). A keyword outside the subset: QHX_E_UNSUPPORTED naming it and
 * where it is. */
QHX_API qhx_status qhx_grammar_from_json_schema(const char *schema, size_t len,
                                                qhx_grammar **out /* OUT, owned */, qhx_error *err);
/* Any JSON object (response_format "json_object"). */
QHX_API qhx_status qhx_grammar_json_object(qhx_grammar **out /* OUT, owned */, qhx_error *err);
/* The rest of a tool call that a forced tool_choice started (qhx_chat_spec.answer_prefix), with
 * the arguments held to each function's "parameters" schema (the JSON Schema subset; a string
 * argument is written as its text, so it is empty or starts with a letter or '_', holds no '<'
 * or line break and is no JSON literal). tools: the n_tools definitions as in qhx_chat_spec;
 * name: the one function (the prefix is qhx_chat_markers tool_prefix NAME tool_named), or NULL
 * for any of them (the prefix is tool_prefix). QHX_E_UNSUPPORTED for a model whose chat format
 * has no tools, or a keyword outside the subset (named). The call syntax is the chat format's. */
QHX_API qhx_status qhx_grammar_tool_call(const qhx_model *model, const char *const *tools, size_t n_tools,
                                         const char *name, qhx_grammar **out /* OUT, owned */, qhx_error *err);
QHX_API void qhx_grammar_free(qhx_grammar *g); /* NULL is a no-op */

/* A constraint at the start of g for the model's vocabulary (the model needs a tokenizer; its
 * byte table is built on first use, once per model). g must outlive it. One output at a time;
 * not thread-safe. */
QHX_API qhx_status qhx_constraint_new(const qhx_model *model, const qhx_grammar *g,
                                      qhx_constraint **out /* OUT, owned: qhx_constraint_free */,
                                      qhx_error *err);
QHX_API void qhx_constraint_free(qhx_constraint *c); /* NULL is a no-op */
QHX_API void qhx_constraint_reset(qhx_constraint *c); /* back to the start of the grammar */
/* Set the logits (qhx_model_n_vocab of them) of every token that cannot come next to -inf. */
QHX_API qhx_status qhx_constraint_mask(qhx_constraint *c, float *logits, qhx_error *err);
/* Whether token may come next (1) or not (0). */
QHX_API int qhx_constraint_allows(qhx_constraint *c, qhx_token token);
/* Follow token (its bytes; a stop or end-of-turn token only where the output may end).
 * QHX_E_ARG when it may not come next (the state is unchanged). */
QHX_API qhx_status qhx_constraint_accept(qhx_constraint *c, qhx_token token, qhx_error *err);
/* Whether the output so far is a whole sentence, and whether it can go on. */
QHX_API int qhx_constraint_can_end(const qhx_constraint *c);
QHX_API int qhx_constraint_can_continue(const qhx_constraint *c);
/* Whether token is one the constraint treats as an end (a stop or end-of-turn token). */
QHX_API int qhx_constraint_is_end(const qhx_constraint *c, qhx_token token);
/* The next token from logits with smp's parameters under the constraint (greedy: the argmax
 * is checked first and the mask built only when it is refused). allow_end 0: no end token.
 * -1 with err set: non-finite logits or a cap hit; -2: no token can come next (the output is
 * complete). The token is not accepted: call qhx_constraint_accept. */
QHX_API qhx_token qhx_constraint_pick(qhx_constraint *c, qhx_sampler_handle *smp, const float *logits,
                                      int allow_end, qhx_error *err);

/* What a constraint cost so far: tokens picked (and accepted), masks built over the whole
 * vocabulary (cached: taken from its per-state cache), nanoseconds spent in picks and accepts
 * (the grammar's share of a generation, for --verbose and BENCHMARKS.md). */
typedef struct qhx_constraint_stats {
    uint64_t picks, masks, cached, ns;
} qhx_constraint_stats;
QHX_API void qhx_constraint_get_stats(const qhx_constraint *c, qhx_constraint_stats *out /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* QHX_H */
