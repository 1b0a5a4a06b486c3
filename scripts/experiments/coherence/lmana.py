import json, numpy as np, pandas as pd, sys
from scipy.stats import spearmanr
D='../shared/data/dhm-visual-storytelling/data'
def off(ds,s):
    df=pd.read_csv(f'{D}/scores/{ds}/{s}_C.csv',dtype={'story_id':str}); return dict(zip(df.story_id,df.C_score))
ds=sys.argv[1]
pool={}
for s in ['gt_test','llava_vc_p3']:
    F=json.load(open(f'lmfeat_{ds}_{s}.json')); c=off(ds,s)
    ids=[i for i in F if F[i] and i in c]
    y=np.array([c[i] for i in ids])
    aggs={}
    sig=lambda x:1/(1+np.exp(-x))
    for T in [0.5,1,2,4,8]:
        aggs[f'sig_d/{T}']=[np.mean([sig(p[0]/T) for p in F[i]]) for i in ids]
    aggs['mean_d']=[np.mean([p[0] for p in F[i]]) for i in ids]
    aggs['min_d']=[np.min([p[0] for p in F[i]]) for i in ids]
    aggs['mean_pmi']=[np.mean([p[1] for p in F[i]]) for i in ids]
    aggs['sig_pmi']=[np.mean([sig(p[1]/4) for p in F[i]]) for i in ids]
    aggs['mean_d_per_tok']=[np.mean([p[0]/p[2] for p in F[i]]) for i in ids]
    aggs['cond_lp_tok']=[np.mean([p[3]/p[2] for p in F[i]]) for i in ids]
    for k,v in aggs.items():
        pool.setdefault(k,[[],[]]); pool[k][0]+=list(v); pool[k][1]+=list(y)
        print(s,len(ids),k, round(spearmanr(v,y).statistic,3), 'mean', round(np.mean(v),3))
for k,(a,b) in pool.items(): print('pooled',k,round(spearmanr(a,b).statistic,3))
