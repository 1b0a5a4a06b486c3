"""Java for the metrics that need it (METEOR 1.5, the Stanford PTB tokenizer).

- `find_java` / `require_java`: locate ``java`` (``$JAVA_HOME/bin/java`` first, then ``PATH``) and check
  its version. Supported: Java 8 or newer (tested with OpenJDK 17). A missing or too old Java raises
  `MissingDependencyError` with one sentence saying how to fix it.
- `meteor_jar`, `paraphrase_table`, `ptb_jar`: the jars pycocoevalcap 1.2 ships (``meteor-1.5.jar`` with
  ``data/paraphrase-en.gz``, ``stanford-corenlp-3.4.1.jar``); we use those exact files so scores match.
- `meteor_server`: ONE warm JVM per process, shared by every METEOR variant and every system scored in the
  run. It runs a small helper class (`HELPER_SOURCE`, compiled once with ``javac`` into the user cache
  directory) that calls Meteor's own Java API (``MeteorConfiguration``/``MeteorScorer``), keeps one scorer per
  configuration (task, language, normalisation: the paraphrase table is loaded once per configuration), scores
  whole batches per round trip with a binary, length-prefixed protocol (so ``|||`` and newlines inside texts
  are harmless) and spreads a batch over threads (one ``MeteorScorer`` copy per thread sharing the read-only
  tables, which is what Meteor's copy constructor is for). Without ``javac`` (a bare JRE) it falls back to
  Meteor's own ``-stdio`` protocol, which gives the same numbers, only slower. The JVM is closed at exit.
  A second configuration of the same language (e.g. meteor-coco's default task after meteor-vist's hter)
  reuses the loaded tables instead of loading them again (`HELPER_SOURCE`'s ``reconfigure``).

Faster alignment, same alignment: the helper's directory also holds our own ``SynonymMatcher`` and
``ParaphraseMatcher`` (same package and name, found before the jar's on the class path; see
`SYNONYM_MATCHER_SOURCE`, `PARAPHRASE_MATCHER_SOURCE`), which add exactly the jar's matches in the jar's order
with memoised synsets and a position index, and it memoises Snowball stems (`HELPER_SOURCE`'s
``CachingStemmer``). Scores are bit-identical to the jar's (tests/test_meteor.py, bench/bench_meteor.py).

Costs (2-core machine shared with other jobs, OpenJDK 17): JVM start ~0.01 s, helper compile ~1-2 s once per
user, English paraphrase/synonym table load 8-28 s per process (the dominant cold cost, identical to the
jar's), then ~0.8 ms CPU per (hypothesis, reference) alignment (the jar: ~1.3 ms warm, ~2.5 ms on its first
pass). Environment:
``VISTKIT_METEOR_THREADS`` (scoring threads), ``VISTKIT_JAVA_OPTS`` (helper JVM options, default -Xmx2G),
``VISTKIT_CACHE`` (where the compiled helper lives).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vistkit.errors import MissingDependencyError

MIN_JAVA = 8
TESTED_JAVA = 17
JAVA_HINT = "METEOR needs Java 8+; install a JRE, e.g. apt-get install default-jre, or set JAVA_HOME"

# Meteor's stdio server reads lines (BufferedReader.readLine: \n, \r, \r\n) and splits on '|||'.
_LINE_BREAKS = re.compile(r"\r\n|[\r\n]")


# --------------------------------------------------------------------------------------------------- java
@dataclass(frozen=True)
class JavaInfo:
    path: str
    version: int
    version_text: str


_JAVA_CACHE: dict[tuple[str | None, str | None], JavaInfo] = {}


def _java_candidates() -> list[str]:
    out: list[str] = []
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = Path(home) / "bin" / ("java.exe" if os.name == "nt" else "java")
        if exe.is_file() and os.access(exe, os.X_OK):
            out.append(str(exe))
    found = shutil.which("java")
    if found:
        out.append(found)
    return out


def parse_java_version(text: str) -> int:
    """The major version from ``java -version`` output (``1.8.0_392`` -> 8, ``17.0.15`` -> 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        m = re.search(r"(?:openjdk|java) (\d+)(?:\.(\d+))?", text)
    if not m:
        return 0
    major = int(m.group(1))
    if major == 1 and m.group(2):
        return int(m.group(2))
    return major


def find_java() -> JavaInfo | None:
    """The Java to use (``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``), or ``None``."""
    key = (os.environ.get("JAVA_HOME"), os.environ.get("PATH"))
    if key in _JAVA_CACHE:
        return _JAVA_CACHE[key]
    for exe in _java_candidates():
        try:
            proc = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        text = (proc.stderr or "") + (proc.stdout or "")
        info = JavaInfo(exe, parse_java_version(text), text.strip().splitlines()[0] if text.strip() else "")
        _JAVA_CACHE[key] = info
        return info
    return None


def require_java(purpose: str = "METEOR") -> JavaInfo:
    """`find_java`, raising `MissingDependencyError` when Java is absent or older than 8."""
    hint = JAVA_HINT.replace("METEOR", purpose, 1)
    info = find_java()
    if info is None:
        raise MissingDependencyError(f"{hint} (no java found on PATH or in JAVA_HOME).")
    if info.version < MIN_JAVA:
        raise MissingDependencyError(f"{hint} (found {info.version_text!r} at {info.path}).")
    return info


def find_javac(java: JavaInfo) -> str | None:
    """``javac`` next to ``java`` (resolving symlinks), else on ``PATH``."""
    real = Path(os.path.realpath(java.path)).parent / "javac"
    if real.is_file() and os.access(real, os.X_OK):
        return str(real)
    sibling = Path(java.path).parent / "javac"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return str(sibling)
    return shutil.which("javac")


# --------------------------------------------------------------------------------------------------- jars
def _pycocoevalcap_dir() -> Path:
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the METEOR and PTB tokenizer jars come with pycocoevalcap 1.2; install it: "
            "pip install pycocoevalcap==1.2"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def meteor_jar() -> Path:
    """``meteor-1.5.jar`` as shipped by pycocoevalcap 1.2 (with ``data/paraphrase-en.gz`` beside it)."""
    p = _pycocoevalcap_dir() / "meteor" / "meteor-1.5.jar"
    if not p.is_file():
        raise MissingDependencyError(f"{p} is missing; reinstall it: pip install pycocoevalcap==1.2")
    return p


def paraphrase_table() -> Path:
    """The English paraphrase table Meteor loads for ``-l en`` (found next to the jar)."""
    p = meteor_jar().parent / "data" / "paraphrase-en.gz"
    if not p.is_file():
        raise MissingDependencyError(f"{p} is missing; reinstall it: pip install pycocoevalcap==1.2")
    return p


def ptb_jar() -> Path:
    """``stanford-corenlp-3.4.1.jar`` as shipped by pycocoevalcap 1.2 (its PTBTokenizer)."""
    p = _pycocoevalcap_dir() / "tokenizer" / "stanford-corenlp-3.4.1.jar"
    if not p.is_file():
        raise MissingDependencyError(f"{p} is missing; reinstall it: pip install pycocoevalcap==1.2")
    return p


def cache_dir() -> Path:
    """Per-user cache (``$VISTKIT_CACHE``, else ``$XDG_CACHE_HOME/vistkit``, else ``~/.cache/vistkit``)."""
    base = os.environ.get("VISTKIT_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "vistkit"


# --------------------------------------------------------------------------------------------------- helper
# The helper speaks a binary protocol on stdin/stdout (big-endian, strings = int32 byte length + UTF-8):
#   'C' task lang norm(str)                   -> int32 config id, int32 load ms, int32 loaded (0: tables
#                                                shared), 4 doubles (alpha beta gamma delta), int32 k + k
#                                                doubles (module weights)
#   'P' cfg n (test ref)*n                    -> n doubles: getMeteorStats(test, ref).score per pair
#   'M' cfg n (line)*n                        -> per line: int32 k + k doubles (the MeteorStats text as
#                                                numbers), double score; then the pooled score. Each line is
#                                                handled like a stdio "SCORE ||| r1 ||| ... ||| hyp" line
#                                                (split on '|||', trim); its stats are re-parsed like "EVAL".
#   'Q'                                       -> exit
HELPER_CLASS = "VistkitMeteor"
HELPER_SOURCE = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import edu.cmu.meteor.aligner.Aligner;
import edu.cmu.meteor.aligner.Stemmer;
import edu.cmu.meteor.scorer.MeteorConfiguration;
import edu.cmu.meteor.scorer.MeteorScorer;
import edu.cmu.meteor.scorer.MeteorStats;
import edu.cmu.meteor.util.Constants;

/** vistkit's METEOR helper: one JVM, one scorer per configuration, batched and multithreaded. */
public class VistkitMeteor {
    static final List<MeteorScorer> scorers = new ArrayList<>();
    static final List<MeteorConfiguration> configs = new ArrayList<>();
    static int threads = 1;
    static ExecutorService pool;

    static final Map<String, MeteorScorer> shared = new HashMap<>();

    /**
     * A scorer for another task/normalisation of an already loaded language and module list, without
     * loading the paraphrase table again: the copy constructor shares the aligner's tables (its weights are
     * fixed at 1/0.5 by
     * MeteorScorer.loadConfiguration whatever the task), then we set the fields loadConfiguration would set.
     */
    static MeteorScorer reconfigure(MeteorScorer s, MeteorConfiguration c) throws Exception {
        java.lang.reflect.Method norm = MeteorScorer.class.getDeclaredMethod("setNormalize", int.class);
        norm.setAccessible(true);
        norm.invoke(s, c.getNormalization());
        ArrayList<Double> p = c.getParameters();
        String[] names = {"alpha", "beta", "gamma", "delta"};
        for (int i = 0; i < 4; i++) {
            java.lang.reflect.Field f = MeteorScorer.class.getDeclaredField(names[i]);
            f.setAccessible(true);
            f.setDouble(s, p.get(i));
        }
        java.lang.reflect.Field mw = MeteorScorer.class.getDeclaredField("moduleWeights");
        mw.setAccessible(true);
        mw.set(s, c.getModuleWeights());
        java.lang.reflect.Field cb = MeteorScorer.class.getDeclaredField("charBased");
        cb.setAccessible(true);
        cb.setBoolean(s, c.getCharBased());
        return s;
    }

    static String readStr(DataInputStream in) throws IOException {
        int n = in.readInt();
        byte[] b = new byte[n];
        in.readFully(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    /** Snowball stems memoised per language (stem(w) depends on w only); misses go to Meteor's stemmer. */
    static final class CachingStemmer implements Stemmer {
        final Stemmer inner;
        final ConcurrentHashMap<String, String> cache;
        CachingStemmer(Stemmer inner, ConcurrentHashMap<String, String> cache) {
            this.inner = inner;
            this.cache = cache;
        }
        public String stem(String word) {
            String got = cache.get(word);
            if (got == null) {
                got = inner.stem(word);
                cache.putIfAbsent(word, got);
            }
            return got;
        }
    }

    static final ConcurrentHashMap<String, ConcurrentHashMap<String, String>> stemCaches =
        new ConcurrentHashMap<>();

    /** Wraps the scorer's aligner's stemmer (a private field, set once per aligner) in a CachingStemmer. */
    static void cacheStems(MeteorScorer s, String language) {
        try {
            java.lang.reflect.Field af = MeteorScorer.class.getDeclaredField("aligner");
            af.setAccessible(true);
            Aligner aligner = (Aligner) af.get(s);
            java.lang.reflect.Field sf = Aligner.class.getDeclaredField("stemmer");
            sf.setAccessible(true);
            Stemmer st = (Stemmer) sf.get(aligner);
            if (st == null || st instanceof CachingStemmer) return;
            sf.set(aligner, new CachingStemmer(st, stemCaches.computeIfAbsent(language,
                k -> new ConcurrentHashMap<>())));
        } catch (ReflectiveOperationException e) {
            // another Meteor build: keep its stemmer (same results, no cache)
        }
    }

    /** One scorer per worker thread; copies share the read-only tables (Meteor's copy constructor). */
    static MeteorScorer[] workers(int cfg) {
        MeteorScorer base = scorers.get(cfg);
        String language = configs.get(cfg).getLanguage();
        MeteorScorer[] w = new MeteorScorer[threads];
        w[0] = base;
        for (int i = 1; i < threads; i++) w[i] = new MeteorScorer(base);
        for (MeteorScorer x : w) cacheStems(x, language);
        return w;
    }

    static final Map<Integer, MeteorScorer[]> workerCache = new HashMap<>();

    interface Job { void run(MeteorScorer s, int i) throws Exception; }

    static void parallel(int cfg, int n, Job job) throws Exception {
        MeteorScorer[] w = workerCache.computeIfAbsent(cfg, VistkitMeteor::workers);
        if (threads == 1 || n < 64) {
            for (int i = 0; i < n; i++) job.run(w[0], i);
            return;
        }
        List<Future<?>> fs = new ArrayList<>();
        int chunk = (n + threads - 1) / threads;
        for (int t = 0; t < threads; t++) {
            final int lo = t * chunk, hi = Math.min(n, lo + chunk);
            final MeteorScorer s = w[t];
            fs.add(pool.submit(() -> { for (int i = lo; i < hi; i++) job.run(s, i); return null; }));
        }
        for (Future<?> f : fs) f.get();
    }

    public static void main(String[] args) throws Exception {
        threads = Math.max(1, Integer.parseInt(args.length > 0 ? args[0] : "1"));
        pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(System.out, 1 << 16));
        while (true) {
            int op;
            try { op = in.readByte(); } catch (EOFException e) { break; }
            if (op == 'Q') break;
            if (op == 'C') {
                String task = readStr(in), lang = readStr(in), normName = readStr(in);
                // -norm = NORMALIZE_KEEP_PUNCT, -lower = NORMALIZE_LC_ONLY (from the jar's Constants)
                int norm = normName.equals("norm") ? Constants.NORMALIZE_KEEP_PUNCT
                    : normName.equals("lower") ? Constants.NORMALIZE_LC_ONLY
                    : normName.equals("nopunct") ? Constants.NORMALIZE_NO_PUNCT : Constants.NO_NORMALIZE;
                long t0 = System.nanoTime();
                // the order MeteorConfiguration asks for (as Meteor's -l/-t options): language, then task
                MeteorConfiguration config = new MeteorConfiguration();
                config.setLanguage(lang);
                if (!task.isEmpty()) config.setTask(task);
                config.setNormalization(norm);
                String key = config.getLanguage() + "|" + config.getModules() + "|" + config.getBeamSize()
                    + "|" + config.getParaDirURL() + "|" + config.getSynDirURL()
                    + "|" + config.getWordFileURL();
                MeteorScorer base = shared.get(key);
                MeteorScorer scorer;
                int loaded;
                if (base == null) {
                    scorer = new MeteorScorer(config);
                    shared.put(key, scorer);
                    loaded = 1;
                } else {
                    scorer = reconfigure(new MeteorScorer(base), config);
                    loaded = 0;
                }
                configs.add(config);
                scorers.add(scorer);
                out.writeInt(scorers.size() - 1);
                out.writeInt((int) ((System.nanoTime() - t0) / 1000000L));
                out.writeInt(loaded);
                ArrayList<Double> p = config.getParameters();
                for (int i = 0; i < 4; i++) out.writeDouble(p.get(i));
                ArrayList<Double> mw = config.getModuleWeights();
                out.writeInt(mw.size());
                for (double d : mw) out.writeDouble(d);
            } else if (op == 'P') {
                int cfg = in.readInt(), n = in.readInt();
                String[] test = new String[n], ref = new String[n];
                for (int i = 0; i < n; i++) { test[i] = readStr(in); ref[i] = readStr(in); }
                double[] score = new double[n];
                parallel(cfg, n, (s, i) -> score[i] = s.getMeteorStats(test[i], ref[i]).score);
                for (int i = 0; i < n; i++) out.writeDouble(score[i]);
            } else if (op == 'M') {
                int cfg = in.readInt(), n = in.readInt();
                String[] line = new String[n];
                for (int i = 0; i < n; i++) line[i] = readStr(in);
                String[] stats = new String[n];
                // SCORE: exactly Meteor.scoreStdio
                parallel(cfg, n, (s, i) -> {
                    String[] part = line[i].split("\\|\\|\\|");
                    ArrayList<String> refs = new ArrayList<>();
                    for (int j = 1; j < part.length - 1; j++) refs.add(part[j].trim());
                    String test = part.length > 1 ? part[part.length - 1].trim() : "";
                    stats[i] = s.getMeteorStats(test, refs).toString();
                });
                // EVAL: parse each stats text, score it, pool them
                MeteorScorer base = scorers.get(cfg);
                MeteorStats agg = new MeteorStats();
                for (int i = 0; i < n; i++) {
                    MeteorStats st = new MeteorStats(stats[i].trim());
                    base.computeMetrics(st);
                    String[] f = stats[i].trim().split("\\s+");
                    out.writeInt(f.length);
                    for (String x : f) out.writeDouble(Double.parseDouble(x));
                    out.writeDouble(st.score);
                    agg.addStats(st);
                }
                base.computeMetrics(agg);
                out.writeDouble(agg.score);
            } else {
                throw new IOException("unknown op " + op);
            }
            out.flush();
        }
        out.flush();
        pool.shutdownNow();
    }
}
"""

# Meteor's synonym stage (edu.cmu.meteor.aligner.SynonymMatcher.match, called by Aligner.align) rebuilt, for
# every pair, a HashSet per word (WordNet synsets of the word and of its base forms) and tested every
# (reference word, test word) couple by iterating one set against the other: about 40% of the alignment time.
# This class has the same name and is compiled into the helper's directory, which comes before the jar on the
# helper's class path, so the JVM loads it instead of the jar's. It computes the same thing: per word the
# union getSynSets(w) + getStemSynSets(w) (pure lookups in the read-only dictionary), memoised per dictionary
# as a sorted int array, and a couple matches when the two arrays intersect and the words differ (Stage ids).
# Matches are added in the jar's loop order (words2 outer, words1 inner) with the jar's field values, so the
# alignment, and every score, is bit-identical (checked against the jar on all 4,846 meteor-vist pairs).
SYNONYM_MATCHER_SOURCE = r"""
package edu.cmu.meteor.aligner;

import java.util.*;
import java.util.concurrent.ConcurrentHashMap;

/** Meteor 1.5's synonym stage with per-word synset sets memoised (same matches, same order). */
public class SynonymMatcher {
    private static final Map<SynonymDictionary, ConcurrentHashMap<String, int[]>> CACHE =
        new IdentityHashMap<>();

    private static int[] synsets(ConcurrentHashMap<String, int[]> cache, SynonymDictionary d, String w) {
        int[] got = cache.get(w);
        if (got != null) return got;
        TreeSet<Integer> all = new TreeSet<>(d.getSynSets(w));
        all.addAll(d.getStemSynSets(w));
        int[] out = new int[all.size()];
        int k = 0;
        for (int x : all) out[k++] = x;
        cache.putIfAbsent(w, out);
        return out;
    }

    private static boolean intersects(int[] a, int[] b) {
        int i = 0, j = 0;
        while (i < a.length && j < b.length) {
            if (a[i] == b[j]) return true;
            if (a[i] < b[j]) i++; else j++;
        }
        return false;
    }

    public static void match(int stage, Alignment a, Stage s, SynonymDictionary synonyms) {
        ConcurrentHashMap<String, int[]> cache;
        synchronized (CACHE) {
            cache = CACHE.get(synonyms);
            if (cache == null) {
                cache = new ConcurrentHashMap<>();
                CACHE.put(synonyms, cache);
            }
        }
        int n1 = a.words1.size(), n2 = a.words2.size();
        int[][] sets1 = new int[n1][];
        int[][] sets2 = new int[n2][];
        for (int i = 0; i < n1; i++) sets1[i] = synsets(cache, synonyms, a.words1.get(i));
        for (int j = 0; j < n2; j++) sets2[j] = synsets(cache, synonyms, a.words2.get(j));
        for (int j = 0; j < n2; j++) {
            if (sets2[j].length == 0) continue;
            for (int i = 0; i < n1; i++) {
                if (!intersects(sets1[i], sets2[j]) || s.words1[i] == s.words2[j]) continue;
                Match m = new Match();
                m.module = stage;
                m.prob = 1.0;
                m.start = j;
                m.length = 1;
                m.matchStart = i;
                m.matchLength = 1;
                s.matches.get(j).add(m);
                s.line1Coverage[i]++;
                s.line2Coverage[j]++;
            }
        }
    }
}
"""

# Meteor's paraphrase stage (ParaphraseMatcher.match) looked for every paraphrase of every n-gram at every
# position of the other sentence. Same class-path override: the same loops, matches and order, but only the
# positions whose word is the paraphrase's first word are compared (an ascending position index per word id).
PARAPHRASE_MATCHER_SOURCE = r"""
package edu.cmu.meteor.aligner;

import java.util.*;

/** Meteor 1.5's paraphrase stage; candidate positions come from a first-word index (same matches, order). */
public class ParaphraseMatcher {
    private static final int[] NONE = new int[0];

    /** word id -> ascending positions of that id in ids */
    private static HashMap<Integer, int[]> positions(int[] ids) {
        HashMap<Integer, int[]> out = new HashMap<>();
        for (int i = 0; i < ids.length; i++) {
            int[] got = out.get(ids[i]);
            if (got == null) {
                got = new int[] {i};
            } else {
                got = Arrays.copyOf(got, got.length + 1);
                got[got.length - 1] = i;
            }
            out.put(ids[i], got);
        }
        return out;
    }

    private static int[] candidates(HashMap<Integer, int[]> index, int[] para, int n) {
        if (para.length == 0) {  // an empty paraphrase matches everywhere, as in the jar's loop
            int[] all = new int[n];
            for (int i = 0; i < n; i++) all[i] = i;
            return all;
        }
        int[] got = index.get(para[0]);
        return got == null ? NONE : got;
    }

    private static boolean matchesAt(int[] ids, int at, int[] para) {
        for (int k = 0; k < para.length; k++) {
            if (at + k == ids.length || ids[at + k] != para[k]) return false;
        }
        return true;
    }

    private static void add(Stage s, int stage, int start, int length, int matchStart, int matchLength) {
        Match m = new Match();
        m.module = stage;
        m.prob = 1.0;
        m.start = start;
        m.length = length;
        m.matchStart = matchStart;
        m.matchLength = matchLength;
        s.matches.get(start).add(m);
        for (int k = 0; k < m.matchLength; k++) s.line1Coverage[matchStart + k]++;
        for (int k = 0; k < m.length; k++) s.line2Coverage[start + k]++;
    }

    public static void match(int stage, Alignment a, Stage s, ParaphraseTransducer t) {
        int[] ids1 = new int[a.words1.size()];
        int[] ids2 = new int[a.words2.size()];
        for (int i = 0; i < ids1.length; i++) ids1[i] = t.translate(a.words1.get(i));
        for (int j = 0; j < ids2.length; j++) ids2[j] = t.translate(a.words2.get(j));
        HashMap<Integer, int[]> index1 = positions(ids1);
        HashMap<Integer, int[]> index2 = positions(ids2);
        // n-grams of words2 paraphrased into words1
        for (int j = 0; j < ids2.length; j++) {
            int[] paths = t.getReferencePaths(ids2, j);
            for (int p = 0; p < paths.length; p += 2) {
                int length = paths[p];
                int[] para = t.getParaphrase(paths[p + 1]);
                for (int i : candidates(index1, para, ids1.length)) {
                    if (matchesAt(ids1, i, para)) add(s, stage, j, length, i, para.length);
                }
            }
        }
        // n-grams of words1 paraphrased into words2
        for (int i = 0; i < ids1.length; i++) {
            int[] paths = t.getReferencePaths(ids1, i);
            for (int p = 0; p < paths.length; p += 2) {
                int length = paths[p];
                int[] para = t.getParaphrase(paths[p + 1]);
                for (int j : candidates(index2, para, ids2.length)) {
                    if (matchesAt(ids2, j, para)) add(s, stage, j, para.length, i, length);
                }
            }
        }
    }
}
"""


def _helper_classpath(java: JavaInfo) -> str | None:
    """Compile the helper once into the cache; returns the directory holding the class, or None (no javac)."""
    jar = meteor_jar()
    sources = HELPER_SOURCE + SYNONYM_MATCHER_SOURCE + PARAPHRASE_MATCHER_SOURCE
    digest = hashlib.sha256((sources + str(jar) + str(java.version)).encode()).hexdigest()[:16]
    target = cache_dir() / "java" / f"meteor-helper-{digest}"
    if (target / f"{HELPER_CLASS}.class").is_file():
        return str(target)
    javac = find_javac(java)
    if javac is None:
        return None
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / f"{HELPER_CLASS}.java"
    src.write_text(HELPER_SOURCE, encoding="utf-8")
    matcher = tmp / "SynonymMatcher.java"
    matcher.write_text(SYNONYM_MATCHER_SOURCE, encoding="utf-8")
    para = tmp / "ParaphraseMatcher.java"
    para.write_text(PARAPHRASE_MATCHER_SOURCE, encoding="utf-8")
    release = ["--release", "8"] if java.version >= 9 else []
    files = [str(src), str(matcher), str(para)]
    proc = subprocess.run(
        [javac, *release, "-nowarn", "-encoding", "UTF-8", "-cp", str(jar), "-d", str(tmp), *files],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    try:
        os.replace(tmp, target)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


def default_threads() -> int:
    """Scoring threads of the helper: ``$VISTKIT_METEOR_THREADS``, else the CPU count (2 to 8)."""
    env = os.environ.get("VISTKIT_METEOR_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(2, min(8, os.cpu_count() or 1))


def helper_jvm_options() -> list[str]:
    """JVM options of the helper: ``$VISTKIT_JAVA_OPTS`` when set, else our defaults.

    ``-Xmx2G`` as pycocoevalcap (Meteor's English tables take ~1.3 GB of heap). ``-XX:TieredStopAtLevel=1``
    (client compiler only): a scoring run is a few seconds of code that is hot at once, and the optimising
    compiler spent most of the first pass compiling and competing for the cores; measured on the full
    meteor-vist set (4,846 pairs, one thread, 2 busy cores, our matchers): first pass 7.9 s -> 4.4-4.7 s, warm
    passes 3.0-3.4 s -> 4.0-4.2 s. A process scores one to a few sets, so the first pass is what counts. The
    parallel/serial collectors and a fixed young generation changed nothing measurable. Scores do not depend
    on these options (the JIT does not change Java's double arithmetic).
    """
    env = os.environ.get("VISTKIT_JAVA_OPTS")
    if env is not None:
        return env.split()
    return ["-Xmx2G", "-XX:TieredStopAtLevel=1"]


@dataclass(frozen=True)
class MeteorConfig:
    """What a Meteor scorer is built from (the rest are the language/task defaults of Meteor 1.5)."""

    task: str = ""  # "" = Meteor's default task; "hter" for the VIST challenge
    language: str = "en"
    norm: bool = False  # -norm: tokenise/normalise punctuation and lower-case (NORMALIZE_KEEP_PUNCT)

    @property
    def norm_name(self) -> str:
        return "norm" if self.norm else "none"


@dataclass(frozen=True)
class ConfigInfo:
    cid: int
    load_seconds: float
    alpha: float
    beta: float
    gamma: float
    delta: float
    module_weights: tuple[float, ...]
    loaded_tables: bool = True  # False: shared the tables of an earlier configuration (no load)


@dataclass
class MultiResult:
    """Per-item Meteor sufficient statistics (rows), per-item scores and the pooled (EVAL) score."""

    stats: list[list[float]]
    scores: list[float]
    corpus: float


class MeteorServer:
    """A warm JVM running `HELPER_SOURCE` (or Meteor's stdio server as a fallback). Thread-safe."""

    def __init__(self, *, threads: int | None = None) -> None:
        java = require_java()
        self.java = java
        self.threads = threads or default_threads()
        self._lock = threading.Lock()
        self._configs: dict[MeteorConfig, ConfigInfo] = {}
        self._stdio: dict[MeteorConfig, StdioMeteor] = {}
        t0 = time.perf_counter()
        helper = _helper_classpath(java)
        self.compile_seconds = time.perf_counter() - t0
        self.uses_helper = helper is not None
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0
        if helper is not None:
            cp = os.pathsep.join([helper, str(meteor_jar())])
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(
                [java.path, *helper_jvm_options(), "-cp", cp, HELPER_CLASS, str(self.threads)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=str(meteor_jar().parent),
            )
            self.start_seconds = time.perf_counter() - t0

    # -- protocol --------------------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise MissingDependencyError(
                "the METEOR Java helper stopped unexpectedly; check that Java works (java -version) and that "
                "2 GB of memory are free"
            ) from exc

    def _read(self, n: int) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        buf = self.proc.stdout.read(n)
        if buf is None or len(buf) != n:
            raise MissingDependencyError(
                "the METEOR Java helper stopped unexpectedly; check that Java works (java -version) and that "
                "2 GB of memory are free"
            )
        return buf

    def _int(self) -> int:
        return int(struct.unpack(">i", self._read(4))[0])

    def _doubles(self, n: int) -> list[float]:
        return list(struct.unpack(f">{n}d", self._read(8 * n))) if n else []

    @staticmethod
    def _str(text: str) -> bytes:
        b = text.encode("utf-8", errors="surrogatepass")
        return struct.pack(">i", len(b)) + b

    # -- api ---------------------------------------------------------------------------------------------
    def config(self, cfg: MeteorConfig) -> ConfigInfo:
        """Load (once) the scorer for ``cfg``; returns its id, load time and parameters."""
        with self._lock:
            return self._config_locked(cfg)

    def _config_locked(self, cfg: MeteorConfig) -> ConfigInfo:
        if cfg in self._configs:
            return self._configs[cfg]
        if self.proc is None:
            t0 = time.perf_counter()
            self._stdio[cfg] = StdioMeteor(cfg, java=self.java)
            info = ConfigInfo(-1, time.perf_counter() - t0, math_nan, math_nan, math_nan, math_nan, ())
        else:
            self._send(b"C" + self._str(cfg.task) + self._str(cfg.language) + self._str(cfg.norm_name))
            cid = self._int()
            ms = self._int()
            loaded = self._int()
            a, b, g, d = self._doubles(4)
            k = self._int()
            info = ConfigInfo(cid, ms / 1000.0, a, b, g, d, tuple(self._doubles(k)), bool(loaded))
        self._configs[cfg] = info
        return info

    def pair_scores(self, cfg: MeteorConfig, tests: Sequence[str], refs: Sequence[str]) -> list[float]:
        """``MeteorScorer.getMeteorStats(test, ref).score`` for each pair (Meteor's API, no text changes)."""
        if len(tests) != len(refs):
            raise ValueError("tests and refs differ in length")
        # identical pairs are scored once (a pair's score depends on the pair only)
        index: dict[tuple[str, str], int] = {}
        where = [index.setdefault((t, r), len(index)) for t, r in zip(tests, refs, strict=True)]
        unique = list(index)
        with self._lock:
            info = self._config_locked(cfg)
            if not tests:
                return []
            if self.proc is None:
                got = self._stdio[cfg].pair_scores([t for t, _ in unique], [r for _, r in unique])
            else:
                parts = [b"P", struct.pack(">ii", info.cid, len(unique))]
                for t, r in unique:
                    parts.append(self._str(t))
                    parts.append(self._str(r))
                self._send(b"".join(parts))
                got = self._doubles(len(unique))
        return [got[k] for k in where]

    def score_lines(self, cfg: MeteorConfig, lines: Sequence[str]) -> MultiResult:
        """Stdio semantics: each ``SCORE ||| ref1 ||| ... ||| hyp`` line -> stats; then one pooled EVAL."""
        with self._lock:
            info = self._config_locked(cfg)
            if self.proc is None:
                return self._stdio[cfg].score_lines(lines)
            parts = [b"M", struct.pack(">ii", info.cid, len(lines))]
            parts += [self._str(line) for line in lines]
            self._send(b"".join(parts))
            stats: list[list[float]] = []
            scores: list[float] = []
            for _ in lines:
                k = self._int()
                stats.append(self._doubles(k))
                scores.append(self._doubles(1)[0])
            corpus = self._doubles(1)[0]
            return MultiResult(stats, scores, corpus)

    def close(self) -> None:
        """Stop the JVM (politely when idle; killed when a request, e.g. a table load, is still running)."""
        idle = self._lock.acquire(timeout=0.5)
        try:
            for s in self._stdio.values():
                s.close()
            self._stdio.clear()
            proc, self.proc = self.proc, None
            if proc is not None and proc.poll() is None:
                try:
                    if not idle:
                        raise OSError("busy")
                    assert proc.stdin is not None
                    proc.stdin.write(b"Q")
                    proc.stdin.close()
                    proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    proc.kill()
                    proc.wait()
        finally:
            if idle:
                self._lock.release()


math_nan = float("nan")


class StdioMeteor:
    """Meteor's own ``-stdio`` server (``java -jar meteor-1.5.jar - - -stdio ...``), one process per config.

    The reference protocol: used as a fallback when ``javac`` is absent, and by tests/benchmarks as the ground
    truth. Texts go in one line each, so newlines are replaced by spaces (Meteor tokenises on whitespace
    anyway) and ``|||`` in a hypothesis is removed as pycocoevalcap does.
    """

    def __init__(self, cfg: MeteorConfig, *, java: JavaInfo | None = None) -> None:
        java = java or require_java()
        cmd = [java.path, "-Xmx2G", "-jar", str(meteor_jar()), "-", "-", "-stdio", "-l", cfg.language]
        if cfg.task:
            cmd += ["-t", cfg.task]
        if cfg.norm:
            cmd.append("-norm")
        self.cfg = cfg
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(meteor_jar().parent),
        )

    def _ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((line + "\n").encode("utf-8"))
        self.proc.stdin.flush()
        out = self.proc.stdout.readline().decode("utf-8").strip()
        if not out:
            raise MissingDependencyError("the METEOR jar stopped unexpectedly; check that Java works")
        return out

    @staticmethod
    def one_line(text: str) -> str:
        return _LINE_BREAKS.sub(" ", text)

    def score_stats(self, hyp: str, refs: Sequence[str]) -> str:
        """One ``SCORE`` round trip: the stats text of the best reference."""
        hyp = self.one_line(hyp).replace("|||", "").replace("  ", " ")
        return self._ask(" ||| ".join(("SCORE", " ||| ".join(self.one_line(r) for r in refs), hyp)))

    def pair_scores(self, tests: Sequence[str], refs: Sequence[str]) -> list[float]:
        """Per pair: SCORE then EVAL (two round trips), the per-pair jar protocol."""
        out = []
        for t, r in zip(tests, refs, strict=True):
            stats = self.score_stats(t, [r])
            out.append(float(self._ask(f"EVAL ||| {stats}")))
            self._drain_one()
        return out

    def _drain_one(self) -> None:
        # EVAL prints one score per stats block and then the pooled score: read the second line too.
        assert self.proc.stdout is not None
        self.proc.stdout.readline()

    def score_lines(self, lines: Sequence[str]) -> MultiResult:
        stats_text = [self._ask(self.one_line(line)) for line in lines]
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(("EVAL ||| " + " ||| ".join(stats_text) + "\n").encode("utf-8"))
        self.proc.stdin.flush()
        scores = [float(self.proc.stdout.readline()) for _ in lines]
        corpus = float(self.proc.stdout.readline())
        return MultiResult([[float(x) for x in s.split()] for s in stats_text], scores, corpus)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


_SERVER: MeteorServer | None = None
_SERVER_LOCK = threading.Lock()


def prefetch(cfg: MeteorConfig) -> None:
    """Start the shared JVM and load ``cfg``'s tables in the background (errors surface on first real use)."""

    def run() -> None:
        try:
            meteor_server().config(cfg)
        except Exception:  # the scoring call reports the same problem with its message
            pass

    threading.Thread(target=run, name="vistkit-meteor-prefetch", daemon=True).start()


def meteor_server() -> MeteorServer:
    """The process-wide warm METEOR JVM (started on first use, closed at exit)."""
    global _SERVER
    with _SERVER_LOCK:
        server = _SERVER
        if server is None or (server.uses_helper and (server.proc is None or server.proc.poll() is not None)):
            server = _SERVER = MeteorServer()
        return server


def shutdown() -> None:
    """Close the shared JVM (also registered with atexit)."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is not None:
            _SERVER.close()
            _SERVER = None


atexit.register(shutdown)


# --------------------------------------------------------------------------------------------------- PTB
PTB_CLASS_AND_FLAGS = ("edu.stanford.nlp.process.PTBTokenizer", "-preserveLines", "-lowerCase")


def run_ptb_tokenizer(lines: Sequence[str]) -> list[str]:
    """Run Stanford's PTBTokenizer (``-preserveLines -lowerCase``) on ``lines`` (no line breaks inside) in one
    JVM call; returns one output line per input line."""
    java = require_java("the PTB tokenizer (coco metrics)")
    if not lines:
        return []
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    proc = subprocess.run(
        [java.path, "-cp", str(ptb_jar()), *PTB_CLASS_AND_FLAGS],
        input=data,
        capture_output=True,
    )
    if proc.returncode != 0:
        raise MissingDependencyError(
            "the Stanford PTB tokenizer failed: " + proc.stderr.decode("utf-8", "replace").strip()[-300:]
        )
    out = proc.stdout.decode("utf-8").split("\n")
    if out and out[-1] == "" and len(out) > len(lines):
        out = out[: len(lines)]
    # an empty last text produces no line at all
    out += [""] * (len(lines) - len(out))
    if len(out) != len(lines):
        raise RuntimeError(f"PTB tokenizer returned {len(out)} lines for {len(lines)} texts")
    return out
