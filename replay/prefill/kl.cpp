// The fidelity modes of rig-prefill-score (rig's fidelity package drives
// them; scorer.cpp's replay mode is untouched by them). They are built into
// the same binary so they compute with the same pinned libllama files.
//
//   rig-prefill-score tokenize MODEL TEXT_FILE OUT_FILE
//     Tokenizes TEXT_FILE as llama-perplexity does (special tokens added,
//     none parsed from the text) and writes
//       tokens N ADD_BOS BOS_ID
//       id id ... (N ids on one line)
//
//   rig-prefill-score kl REF_MODEL ARM_MODEL CTX THREADS IN_FILE OUT_FILE
//     Loads both models (they must share the vocabulary; rig checks its hash
//     first) and, per segment of IN_FILE,
//       seg ID N_CONTEXT id id ...
//     runs the segment's tokens through each model in one call (n_batch =
//     CTX, physical batches of 512, as llama-perplexity runs a chunk) and
//     compares the next-token distributions at positions N_CONTEXT-1 .. n-2,
//     which predict tokens N_CONTEXT .. n-1. OUT_FILE gets, per segment,
//       seg ID N_SCORED
//       I KL REF_TOP ARM_TOP REF_LOGP ARM_LOGP      (N_SCORED lines)
//     KL is KL(ref || arm) in nats over the full vocabulary, computed in
//     double from the raw logits; REF_TOP and ARM_TOP are each model's
//     highest-logit token (the first on a tie, as llama-perplexity takes
//     it); REF_LOGP and ARM_LOGP are the log-probabilities each gives the
//     text's next token. Or: error ID MESSAGE. The first line is
//       ready N_CTX N_VOCAB SYSTEM_INFO
//     and the last "done MS CPU_MS": the wall and processor milliseconds
//     spent past loading (processor time over every thread, which a busy
//     machine's waiting does not inflate).
//
//   rig-prefill-score gen MODEL CTX THREADS IN_FILE OUT_FILE
//     What generating the scored tokens would cost on the same library:
//     per segment of IN_FILE, the first N_CONTEXT tokens in one call, then
//     each further token in a call of its own, with its logits, as decode
//     steps run. OUT_FILE gets "ready ...", one "seg ID N_SCORED" per
//     segment, and "done MS CPU_MS". `rig bench fidelity` divides kl's
//     times by these.
//
// Both models stay loaded rather than one writing its log-probs to a file for
// the other (llama-perplexity's base file): a full-vocabulary row is 49152
// floats for SmolLM2, so a study's few thousand tokens would be gigabytes of
// scratch, and llama-perplexity's 16-bit compression of that file is an error
// rig's measure need not carry.
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

int kl_main(int argc, char ** argv);
int gen_main(int argc, char ** argv);
int tokenize_main(int argc, char ** argv);

// kl_done is the closing line: wall and processor milliseconds since t0, c0.
static std::string kl_done(std::chrono::steady_clock::time_point t0, std::clock_t c0) {
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = 1000.0 * (double) (std::clock() - c0) / CLOCKS_PER_SEC;
    return "done " + std::to_string(wall) + " " + std::to_string(cpu) + "\n";
}

// kl_read_seg parses "seg ID N_CONTEXT id ..." into its parts; false when
// the line is no segment or breaks its rules (said on out).
static bool kl_read_seg(const std::string & line, int n_vocab, int n_ctx, std::string & id, int & n_context,
        std::vector<llama_token> & toks, std::ostream & out) {
    std::istringstream ss(line);
    std::string cmd;
    n_context = 0;
    toks.clear();
    ss >> cmd >> id >> n_context;
    if (cmd != "seg") {
        out << "error - unknown request " << cmd << "\n";
        return false;
    }
    for (llama_token t; ss >> t;) toks.push_back(t);
    bool bad = n_context < 1 || (int) toks.size() <= n_context;
    for (auto t : toks) bad = bad || t < 0 || t >= n_vocab;
    if (bad) {
        out << "error " << id << " malformed segment (N_CONTEXT 1 or more, fewer than its tokens, ids in the vocabulary)\n";
        return false;
    }
    if ((int) toks.size() > n_ctx) {
        out << "error " << id << " " << toks.size() << " tokens is past the context of " << n_ctx << "\n";
        return false;
    }
    return true;
}

static void kl_quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static llama_model * kl_load(const char * path) {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * m = llama_model_load_from_file(path, mp);
    if (!m) fprintf(stderr, "cannot load %s\n", path);
    return m;
}

int tokenize_main(int argc, char ** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s tokenize MODEL TEXT_FILE OUT_FILE\n", argv[0]);
        return 2;
    }
    llama_log_set(kl_quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[2]);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::ifstream in(argv[3], std::ios::binary);
    if (!in) {
        fprintf(stderr, "cannot read %s\n", argv[3]);
        return 1;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // As common_tokenize: ask, and ask again with the size it says it needs.
    std::vector<llama_token> toks(text.size() + 2);
    int n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), true, false);
    if (n < 0) {
        toks.resize(-n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), true, false);
    }
    if (n < 0) {
        fprintf(stderr, "cannot tokenize %s\n", argv[3]);
        return 1;
    }
    std::ofstream out(argv[4]);
    out << "tokens " << n << " " << (llama_vocab_get_add_bos(vocab) ? 1 : 0) << " " << llama_vocab_bos(vocab) << "\n";
    for (int i = 0; i < n; i++) out << (i ? " " : "") << toks[i];
    out << "\n";
    out.flush();
    llama_model_free(model);
    llama_backend_free();
    return out ? 0 : 1;
}

// kl_pass runs toks through ctx in one call, logits kept from position from.
static bool kl_pass(llama_context * ctx, const std::vector<llama_token> & toks, int from) {
    llama_memory_clear(llama_get_memory(ctx), true);
    const int n = (int) toks.size();
    llama_batch b = llama_batch_init(n, 0, 1);
    b.n_tokens = n;
    for (int j = 0; j < n; j++) {
        b.token[j] = toks[j];
        b.pos[j] = j;
        b.n_seq_id[j] = 1;
        b.seq_id[j][0] = 0;
        b.logits[j] = j >= from && j < n - 1;
    }
    const bool ok = llama_decode(ctx, b) == 0;
    llama_batch_free(b);
    return ok;
}

// log_softmax writes the log-probabilities of logits into lp, in double, and
// returns the index of the highest logit (the first of a tie).
static int log_softmax(const float * logits, int n_vocab, std::vector<double> & lp) {
    int top = 0;
    for (int v = 1; v < n_vocab; v++) {
        if (logits[v] > logits[top]) top = v;
    }
    const double mx = logits[top];
    double sum = 0;
    for (int v = 0; v < n_vocab; v++) sum += std::exp((double) logits[v] - mx);
    const double lse = mx + std::log(sum);
    for (int v = 0; v < n_vocab; v++) lp[v] = (double) logits[v] - lse;
    return top;
}

// kl_segment scores one segment through both contexts into answer.
static bool kl_segment(llama_context * ref, llama_context * arm, int n_vocab, const std::string & id,
        const std::vector<llama_token> & toks, int n_context, std::string & answer) {
    const int n = (int) toks.size();
    if (!kl_pass(ref, toks, n_context - 1) || !kl_pass(arm, toks, n_context - 1)) return false;
    std::vector<double> lr(n_vocab), la(n_vocab);
    char buf[160];
    answer = "seg " + id + " " + std::to_string(n - n_context) + "\n";
    for (int j = n_context - 1; j < n - 1; j++) {
        const int tr = log_softmax(llama_get_logits_ith(ref, j), n_vocab, lr);
        const int ta = log_softmax(llama_get_logits_ith(arm, j), n_vocab, la);
        double kl = 0;
        for (int v = 0; v < n_vocab; v++) kl += std::exp(lr[v]) * (lr[v] - la[v]);
        const llama_token next = toks[j + 1];
        snprintf(buf, sizeof buf, "%d %.9g %d %d %.9g %.9g\n", j + 1 - n_context, kl, tr, ta, lr[next], la[next]);
        answer += buf;
    }
    return true;
}

int kl_main(int argc, char ** argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s kl REF_MODEL ARM_MODEL CTX THREADS IN_FILE OUT_FILE\n", argv[0]);
        return 2;
    }
    const int n_ctx = atoi(argv[4]);
    const int n_threads = atoi(argv[5]);
    if (n_ctx < 2 || n_threads < 1) {
        fprintf(stderr, "CTX must be 2 or more and THREADS 1 or more\n");
        return 2;
    }
    llama_log_set(kl_quiet, nullptr);
    llama_backend_init();
    llama_model * mref = kl_load(argv[2]);
    llama_model * marm = mref ? kl_load(argv[3]) : nullptr;
    if (!mref || !marm) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(mref));
    if (llama_vocab_n_tokens(llama_model_get_vocab(marm)) != n_vocab) {
        fprintf(stderr, "the models' vocabularies differ in size (%d and %d)\n", n_vocab,
                llama_vocab_n_tokens(llama_model_get_vocab(marm)));
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = std::min(n_ctx, 512);
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    llama_context * ref = llama_init_from_model(mref, cp);
    llama_context * arm = ref ? llama_init_from_model(marm, cp) : nullptr;
    if (!ref || !arm) {
        fprintf(stderr, "cannot make a context of %d\n", n_ctx);
        return 1;
    }
    std::ifstream in(argv[6]);
    std::ofstream out(argv[7]);
    std::string info = llama_print_system_info();
    std::replace(info.begin(), info.end(), '\n', ' ');
    out << "ready " << llama_n_ctx(ref) << " " << n_vocab << " " << info << "\n";
    std::string line, id;
    std::vector<llama_token> toks;
    int n_context = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    while (std::getline(in, line)) {
        if (!kl_read_seg(line, n_vocab, n_ctx, id, n_context, toks, out)) continue;
        std::string answer;
        if (!kl_segment(ref, arm, n_vocab, id, toks, n_context, answer)) {
            out << "error " << id << " decode failed\n";
            continue;
        }
        out << answer;
    }
    out << kl_done(t0, c0);
    out.flush();
    const bool ok = (bool) out;
    llama_free(arm);
    llama_free(ref);
    llama_model_free(marm);
    llama_model_free(mref);
    llama_backend_free();
    return ok ? 0 : 1;
}

int gen_main(int argc, char ** argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s gen MODEL CTX THREADS IN_FILE OUT_FILE\n", argv[0]);
        return 2;
    }
    const int n_ctx = atoi(argv[3]);
    const int n_threads = atoi(argv[4]);
    if (n_ctx < 2 || n_threads < 1) {
        fprintf(stderr, "CTX must be 2 or more and THREADS 1 or more\n");
        return 2;
    }
    llama_log_set(kl_quiet, nullptr);
    llama_backend_init();
    llama_model * model = kl_load(argv[2]);
    if (!model) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = std::min(n_ctx, 512);
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot make a context of %d\n", n_ctx);
        return 1;
    }
    std::ifstream in(argv[5]);
    std::ofstream out(argv[6]);
    std::string info = llama_print_system_info();
    std::replace(info.begin(), info.end(), '\n', ' ');
    out << "ready " << llama_n_ctx(ctx) << " " << n_vocab << " " << info << "\n";
    std::string line, id;
    std::vector<llama_token> toks;
    int n_context = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    while (std::getline(in, line)) {
        if (!kl_read_seg(line, n_vocab, n_ctx, id, n_context, toks, out)) continue;
        // The context in one call, then one call per token: a decode step
        // each, as generation runs them (sampling aside).
        llama_memory_clear(llama_get_memory(ctx), true);
        // A batch without per-token flags outputs its last token's logits,
        // which generation samples its first token from.
        bool ok = llama_decode(ctx, llama_batch_get_one(toks.data(), n_context)) == 0;
        for (int j = n_context; ok && j < (int) toks.size(); j++) {
            ok = llama_decode(ctx, llama_batch_get_one(&toks[j], 1)) == 0;
        }
        if (!ok) {
            out << "error " << id << " decode failed\n";
            continue;
        }
        out << "seg " << id << " " << toks.size() - n_context << "\n";
    }
    out << kl_done(t0, c0);
    out.flush();
    const bool ok = (bool) out;
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return ok ? 0 : 1;
}
