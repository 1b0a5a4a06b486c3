// vistkit: Meteor 1.5's paraphrase stage (ParaphraseMatcher.match) looked for every paraphrase of every n-gram
// at every position of the other sentence. Same class-path override as SynonymMatcher: the same loops, matches
// and order, but only the positions whose word is the paraphrase's first word are compared (an ascending
// position index per word id).
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
