// vistkit: Meteor 1.5's synonym stage (edu.cmu.meteor.aligner.SynonymMatcher.match, called by Aligner.align)
// rebuilt, for every pair, a HashSet per word (WordNet synsets of the word and of its base forms) and tested every
// (reference word, test word) couple by iterating one set against the other: about 40% of the alignment time.
// This class has the same name and is compiled into the helper's directory, which comes before the jar on the
// helper's class path, so the JVM loads it instead of the jar's. It computes the same thing: per word the union
// getSynSets(w) + getStemSynSets(w) (pure lookups in the read-only dictionary), memoised per dictionary as a
// sorted int array, and a couple matches when the two arrays intersect and the words differ (Stage ids). Matches
// are added in the jar's loop order (words2 outer, words1 inner) with the jar's field values, so the alignment,
// and every score, is bit-identical (checked against the jar on all 4,846 meteor-vist pairs).
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
